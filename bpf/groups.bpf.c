//go:build ignore

/* groups.bpf.c lists process groups, in the kernel. list_groups, an
 * iter/task program, writes one record (tgid, pgid) per thread-group leader
 * on the host (a leader whose main thread has exited while others run is
 * still listed): one read replaces a walk of /proc that reads every
 * process's stat to find the payload's group; userspace keeps the group it
 * asks for and reads only those processes. list_group_of, run on the one
 * task whose pid is the group's number (the link's task filter), walks that
 * number's own list of group members instead: a read that costs the
 * group's size, not the host's. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

char __license[] SEC("license") = "GPL";

#define PIDTYPE_PGID 2

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct upid {
	int nr;
};

struct hlist_node {
	struct hlist_node *next;
	struct hlist_node **pprev; /* for the size: pid_links[] is an array of them */
};

struct hlist_head {
	struct hlist_node *first;
};

struct pid {
	struct hlist_head tasks[4];
	struct upid numbers[1];
};

struct signal_struct {
	struct pid *pids[4];
};

struct task_struct {
	int pid;
	int tgid;
	struct signal_struct *signal;
	struct pid *thread_pid;
	struct hlist_node pid_links[4];
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

/* The most members a group can have: one per pid. */
#define PID_MAX_LIMIT (4 * 1024 * 1024)

struct walk {
	void *seq;
	__u64 node;      /* the hlist_node of the next member; 0 at the list's end */
	__u64 links_off; /* where pid_links[PIDTYPE_PGID] sits in a task_struct */
	__u64 tgid_off;
	__u32 pgid;
};

/* walk_member writes the member whose pid_links[PIDTYPE_PGID] is w->node
 * and steps to the next. The list is RCU-protected and an iterator's
 * program runs under rcu_read_lock: a member removed meanwhile still
 * points on. A read that fails, or a write past what the iterator takes
 * from one object (its 32 KiB buffer: a group of more than 4,096), stops
 * the walk short of the end. */
static long walk_member(__u64 i, struct walk *w)
{
	struct task_group r = {};
	__u64 next = 0;

	if (!w->node)
		return 1;
	if (bpf_probe_read_kernel(&r.tgid, sizeof(r.tgid), (void *)(w->node - w->links_off + w->tgid_off)) ||
	    bpf_probe_read_kernel(&next, sizeof(next), (void *)w->node))
		return 1;
	r.pgid = w->pgid;
	if (bpf_seq_write(w->seq, &r, sizeof(r)))
		return 1;
	w->node = next;
	return 0;
}

/* A last record (the task's pid, pgid 0) says the walk reached the list's
 * end: without it userspace lists the group with list_groups instead. */
SEC("iter/task")
int list_group_of(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct task_group done = {};
	struct walk w = {};
	struct pid *number;

	if (!task)
		return 0;
	number = task->thread_pid;
	if (!number)
		return 0;
	w.seq = ctx->meta->seq;
	w.node = (__u64)number->tasks[PIDTYPE_PGID].first;
	w.links_off = bpf_core_field_offset(struct task_struct, pid_links) + PIDTYPE_PGID * sizeof(struct hlist_node);
	w.tgid_off = bpf_core_field_offset(struct task_struct, tgid);
	w.pgid = task->pid;
	bpf_loop(PID_MAX_LIMIT, walk_member, &w, 0);
	if (w.node)
		return 0;
	done.tgid = task->pid;
	bpf_seq_write(ctx->meta->seq, &done, sizeof(done));
	return 0;
}
