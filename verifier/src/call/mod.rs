//! Calls: helpers by their 6.18 prototypes ([`helper`]), kfuncs ([`kfunc`]), bpf-to-bpf calls
//! ([`subprog`]) and callbacks ([`callback`]).

pub mod callback;
pub mod const_str;
pub mod dynptr;
pub mod global;
pub mod helper;
pub mod iter;
pub mod kernel_objects;
pub mod kfunc;
pub mod kfunc_sets;
pub mod ksym;
pub mod lock;
pub mod map_field;
pub mod proto;
pub mod stack_obj;
pub mod subprog;

/// How a message names a kfunc's or a global function's argument `i`: 7.x by its register
/// (`reg_arg_name`, "R1"); 6.18 in the words each place had (`words_until_7`: "arg0",
/// "arg#0", "arg #0").
pub(crate) fn call_arg_name(env: &crate::env::Env<'_>, i: usize, words_until_7: String) -> String {
    if crate::behaviour::names_call_args_by_register(env.input.kernel.version()) {
        format!("R{}", i + 1)
    } else {
        words_until_7
    }
}
