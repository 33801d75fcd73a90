# Sourced by bench_corpus.sh and bench_trusted.sh (from the repository's root): what each
# corpus program is benchmarked on, the capture its interesting paths run on and its inputs.
#
# corpus_bench_args NAME OBJ: sets the array `args` to OBJ, its capture, maps, FIB and program.
corpus_bench_args() {
    local name=$1 obj=$2 capture
    case $name in
        l4lb | nat_lb) capture=flows.pcap ;;
        ddos_filter | ringbuf_events) capture=attack.pcap ;;
        globals) capture=vlan.pcap ;;
        *) capture=normal.pcap ;;
    esac
    args=("$obj" "examples/pcap/$capture")
    # xsk_dispatch's XSKMAP entry needs a bound AF_XDP socket in the kernel: run it unset.
    if [ -f "examples/maps/$name.json" ] && [ "$name" != xsk_dispatch ]; then
        args+=(--maps "examples/maps/$name.json")
    fi
    if [ "$name" = tailcall ]; then
        args+=(--prog xdp_entry)
    fi
    if [ -f "examples/fib/$name.json" ]; then
        args+=(--fib "examples/fib/$name.json")
    fi
}
