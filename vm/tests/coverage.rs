//! Coverage recorded by the interpreter: which instructions ran and which way each branch went.

use bpfemu_isa::Program;
use bpfemu_isa::asm::assemble_kernel;
use bpfemu_vm::coverage::{FELL_THROUGH, RAN, TAKEN};
use bpfemu_vm::{Coverage, Interpreter, Memory, NoHelpers, Options};

fn program(text: &str) -> Program {
    Program::decode(assemble_kernel(text).unwrap()).unwrap()
}

#[test]
fn branches_and_instructions_are_recorded_per_run() {
    // if (r1 > 5) r0 = 1 else r0 = 2
    let prog = program("if r1 > 0x5 goto pc+2\nr0 = 2\nexit\nr0 = 1\nexit\n");
    let mut interp = Interpreter::new(Options::default());
    interp.set_coverage(Some(Coverage::new([prog.len()])));
    let mut mem = Memory::new();
    assert_eq!(
        interp.run(&prog, [9, 0, 0, 0, 0], &mut mem, &mut NoHelpers),
        Ok(1)
    );
    let cov = interp.coverage_mut().unwrap().clone();
    assert_eq!(cov.program(0), &[RAN | TAKEN, 0, 0, RAN, RAN]);

    assert_eq!(
        interp.run(&prog, [1, 0, 0, 0, 0], &mut mem, &mut NoHelpers),
        Ok(2)
    );
    let cov = interp.coverage_mut().unwrap();
    assert_eq!(
        cov.program(0),
        &[RAN | TAKEN | FELL_THROUGH, RAN, RAN, RAN, RAN]
    );
}

#[test]
fn no_coverage_unless_asked() {
    let prog = program("r0 = 0\nexit\n");
    let mut interp = Interpreter::new(Options::default());
    let mut mem = Memory::new();
    assert_eq!(interp.run(&prog, [0; 5], &mut mem, &mut NoHelpers), Ok(0));
    assert!(interp.coverage_mut().is_none());
}
