"""Bad input raises bpfemu's exceptions with the command line's messages (which it prints
after `bpfemu: ` and exits 2 on)."""

import pytest
from conftest import PCAP, VERIFY_DATA, corpus, eth, run_cli
from scapy.layers.inet import IP, UDP

import bpfemu


def cli_error(cli, *args) -> str:
    result = run_cli(cli, *args)
    assert result.returncode == 2, result.stderr
    line = result.stderr.rstrip("\n")
    assert line.startswith("bpfemu: ")
    return line[len("bpfemu: ") :]


@pytest.mark.parametrize(
    "path, prog",
    [
        ("/nonexistent/prog.o", None),
        (str(VERIFY_DATA / "unchecked_read.o"), None),  # two XDP programs, none named
        (corpus("pass"), "no_such_prog"),
        (str(PCAP / "normal.pcap"), None),  # not an ELF object
    ],
)
def test_load_errors_say_what_the_cli_says(bpfemu_cli, path, prog):
    with pytest.raises(bpfemu.LoadError) as caught:
        bpfemu.load(path, prog)
    args = ["replay", path, str(PCAP / "normal.pcap")] + (["--prog", prog] if prog else [])
    assert str(caught.value) == cli_error(bpfemu_cli, *args)


def test_a_bad_map_file(bpfemu_cli, tmp_path):
    bad = tmp_path / "maps.json"
    bad.write_text('{"acl": [{"key": {"proto": "tcp"}, "value": {}}]}')
    with pytest.raises(bpfemu.LoadError) as caught:
        bpfemu.load(corpus("firewall"), maps=bad)
    cli = cli_error(
        bpfemu_cli, "replay", corpus("firewall"), str(PCAP / "normal.pcap"), "--maps", str(bad)
    )
    assert str(caught.value) == cli
    assert str(bad) in cli


def test_a_missing_capture(bpfemu_cli):
    prog = bpfemu.load(corpus("pass"))
    with pytest.raises(bpfemu.LoadError) as caught:
        prog.replay("/nonexistent/capture.pcap")
    cli = cli_error(bpfemu_cli, "replay", corpus("pass"), "/nonexistent/capture.pcap")
    assert str(caught.value) == cli


def test_every_error_is_a_bpfemu_error():
    for kind in (bpfemu.LoadError, bpfemu.VerifierError, bpfemu.RunError, bpfemu.MapError):
        assert issubclass(kind, bpfemu.Error)


def test_packets_the_kernel_refuses():
    prog = bpfemu.load(corpus("pass"))
    # BPF_PROG_TEST_RUN refuses a frame shorter than an Ethernet header.
    with pytest.raises(bpfemu.RunError, match="refused as the kernel refuses it"):
        prog.run(b"\x00" * 10)
    # The program still runs the next packet.
    assert (
        prog.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP()).action
        == bpfemu.XdpAction.PASS
    )


def test_what_is_not_a_packet():
    prog = bpfemu.load(corpus("pass"))
    # bytes(60) would be sixty zero bytes: an int is refused, not taken for a length.
    with pytest.raises(TypeError, match="not int"):
        prog.run(60)
    with pytest.raises(TypeError, match="not str"):
        prog.run("ff" * 60)
    with pytest.raises(ValueError, match="unknown engine"):
        bpfemu.load(corpus("pass"), engine="fast")


def test_a_program_stays_on_the_thread_that_loaded_it():
    import threading

    prog = bpfemu.load(corpus("pass"))
    raised = []

    def use_elsewhere():
        try:
            prog.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP())
        except bpfemu.Error as error:
            raised.append(str(error))

    thread = threading.Thread(target=use_elsewhere, name="worker")
    thread.start()
    thread.join()
    assert len(raised) == 1 and "load the object again in thread 'worker'" in raised[0]
    assert (
        prog.run(eth() / IP(src="198.51.100.1", dst="192.0.2.1") / UDP()).action
        == bpfemu.XdpAction.PASS
    )
