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
