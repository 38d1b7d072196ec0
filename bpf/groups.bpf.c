//go:build ignore

/* groups.bpf.c lists every process's process group, in the kernel: an
 * iter/task program writes one record (tgid, pgid) per thread-group leader
 * on the host (a leader whose main thread has exited while others run is
 * still listed). One read replaces a walk of /proc that reads every
 * process's stat to find the payload's group; userspace keeps the group it
 * asks for and reads only those processes. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "GPL";

#define PIDTYPE_PGID 2

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct upid {
	int nr;
};

struct pid {
	struct upid numbers[1];
};

struct signal_struct {
	struct pid *pids[4];
};

struct task_struct {
	int pid;
	int tgid;
	struct signal_struct *signal;
};

struct bpf_iter_meta {
	void *seq;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

#pragma clang attribute pop

/* task_group is one record: a process and its group, as the host's pid
 * namespace numbers them. */
struct task_group {
	__u32 tgid;
	__u32 pgid;
};

/* Kept so that bpf2go emits a Go type for the record. */
const struct task_group *unused_task_group __attribute__((unused));

SEC("iter/task")
int list_groups(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct task_group r = {};
	struct signal_struct *sig;
	struct pid *pgrp;

	if (!task || task->pid != task->tgid)
		return 0;
	/* Trusted pointers from the iterator: faulting loads, no helper. */
	sig = task->signal;
	if (!sig)
		return 0;
	pgrp = sig->pids[PIDTYPE_PGID];
	if (!pgrp)
		return 0;
	r.tgid = task->tgid;
	r.pgid = pgrp->numbers[0].nr;
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
