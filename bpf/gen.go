// Package bpf holds the kernel half of gpu-hold's eBPF tracker: lineage.bpf.c
// (tracepoints on fork, exec and exit that keep one hold's process lineage in
// a map and stream what they see through a ring buffer), the Go objects that
// bpf2go generated from it (committed: building needs no clang), and a small
// API to load, attach, seal, read and pin one hold's copy of them.
// gen.go owns the generate step; `make generate` runs it. lineage.bpf.c is
// compiled twice: lineage_bpfel.* also kills a sealed member's child at
// birth with the kfunc bpf_send_signal_task (Linux 6.13+), and
// lineage_nokfunc_bpfel.* (-DSEAL_AT_FORK) references no kfunc, for older
// kernels; seal.go chooses between them.
package bpf

//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3" -type event -type exec_event -type member -type hold_config -type hold_state lineage lineage.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
//go:generate go tool bpf2go -tags linux -target bpfel -cflags "-O2 -g -Wall -Werror -mcpu=v3 -DSEAL_AT_FORK" -output-stem lineage_nokfunc lineageNokfunc lineage.bpf.c -- -I/usr/include/x86_64-linux-gnu -I/usr/include/aarch64-linux-gnu
