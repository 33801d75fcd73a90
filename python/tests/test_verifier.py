"""The verifier's verdict from Python, and a rejected program refused as the command line
refuses it: with the kernel's message at the C source line."""

import pytest
from conftest import PCAP, VERIFY_DATA, corpus, eth, run_cli
from scapy.layers.inet import IP, UDP

import bpfemu

UNCHECKED = str(VERIFY_DATA / "unchecked_read.o")


def test_an_accepted_program():
    verdict = bpfemu.load(corpus("firewall")).verify()
    assert verdict.accepted and verdict.verdict == "accepted"
    assert verdict.program == "xdp_firewall" and verdict.section == "xdp"
    assert verdict.message is None and verdict.line is None
    assert verdict.processed_insns > 0
    assert verdict.log == ""


def test_the_log_at_the_level_asked():
    prog = bpfemu.load(corpus("pass"))
    log = prog.verify(log_level=2).log
    assert "processed" in log and "R1=ctx()" in log
    with pytest.raises(ValueError, match="log_level=3"):
        prog.verify(log_level=3)


def test_a_rejected_program_says_why_and_where():
    prog = bpfemu.load(UNCHECKED, prog="xdp_unchecked")
    verdict = prog.verify(log_level=1)
    assert not verdict.accepted and verdict.verdict == "rejected"
    assert verdict.message == "R1 offset is outside of the packet"
    assert (verdict.file, verdict.line, verdict.column) == ("./unchecked_read.c", 19, 14)
    assert "h_proto" in verdict.source
    assert verdict.text.startswith("./unchecked_read.c:19:14: error: R1 offset is outside")
    assert verdict.insn_text == "1: (71) r2 = *(u8 *)(r1 +12)"
    assert verdict.message in verdict.log


def test_running_a_rejected_program_raises_as_the_cli_refuses_it(bpfemu_cli):
    prog = bpfemu.load(UNCHECKED, prog="xdp_unchecked")
    with pytest.raises(bpfemu.VerifierError) as caught:
        prog.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP())
    error = caught.value
    assert error.program == "xdp_unchecked"
    assert error.message == prog.verify().message
    assert (error.file, error.line) == ("./unchecked_read.c", 19)
    # The same text as `bpfemu replay` prints before it exits 1.
    cli = run_cli(
        bpfemu_cli, "replay", UNCHECKED, str(PCAP / "normal.pcap"), "--prog", "xdp_unchecked"
    )
    assert cli.returncode == 1
    assert str(error) == cli.stderr.rstrip("\n")
    # A replay is refused the same way.
    with pytest.raises(bpfemu.VerifierError):
        prog.replay(PCAP / "normal.pcap")


def test_no_verify_runs_it_in_checked_mode():
    prog = bpfemu.load(UNCHECKED, prog="xdp_unchecked", no_verify=True)
    # A frame long enough for the unchecked read runs; the verdict follows its ethertype.
    assert (
        prog.run(eth() / IP(src="192.0.2.2", dst="192.0.2.1") / UDP()).action
        == bpfemu.XdpAction.PASS
    )


def test_an_undecided_program_is_no_pass(bpfemu_cli):
    # A kfunc bpfemu's verifier does not check yet: neither accepted nor rejected, and not
    # run, as the command line refuses it.
    undecided = str(VERIFY_DATA.parent / "undecided" / "wq.o")
    prog = bpfemu.load(undecided)
    verdict = prog.verify()
    assert (verdict.verdict, verdict.accepted) == ("undecided", False)
    assert verdict.message == "not yet supported: kfunc bpf_wq_init"
    with pytest.raises(bpfemu.VerifierError) as caught:
        prog.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP())
    cli = run_cli(bpfemu_cli, "replay", undecided, str(PCAP / "normal.pcap"))
    assert cli.returncode == 1 and str(caught.value) == cli.stderr.rstrip("\n")
