//go:build ignore

/* lineage.bpf.c keeps one hold's process lineage in the kernel: the child of
 * a member is a member, from the instant it is forked (before its first
 * instruction) until its whole thread group has exited. Three BTF-enabled
 * tracepoints (tp_btf: no tracefs needed) do the work:
 *
 *   sched_process_fork  admits the child of a member (or a child of the
 *                       launcher: the payload); once sealed, kills the forking
 *                       member (and, see SEAL_AT_FORK, its newborn child)
 *                       instead of letting the lineage grow;
 *   sched_process_exec  records the program and a bounded argv;
 *   sched_process_exit  removes a member when its thread group is dead.
 *
 * Every admission, exec and exit is also streamed through a ring buffer for
 * the hold's record. Nothing is lost silently: a full lineage map and a full
 * ring buffer are both counted in the state map. Each hold loads its own copy
 * of these programs and maps, so holds never see each other's members.
 *
 * The file is compiled twice (gen.go). By default the seal also kills the
 * newborn child at its fork with the kfunc bpf_send_signal_task (Linux
 * 6.13+). With -DSEAL_AT_FORK no kfunc is referenced, so the object loads on
 * older kernels: bpf_send_signal can only signal the current task, which at
 * sched_process_fork is the parent, so only the forking member dies at the
 * fork; its child, a member like any other, is left to the KILL pass. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "types.h"

char __license[] SEC("license") = "GPL";

#define SIGKILL 9
#define EEXIST 17
#define SIGNAL_GROUP_EXIT 0x00000004

/* LINEAGE_CAPACITY is how many live members one hold can track (the default
 * pid_max is 32768; 4194304 on large hosts). Members past it are counted in
 * state.overflow and flagged in their event. */
#define LINEAGE_CAPACITY 65536
/* EVENTS_BYTES is the default ring buffer size; the loader may change it. */
#define EVENTS_BYTES (4 << 20)

/* start_boottime (ns) to the clock ticks of /proc/PID/stat (USER_HZ 100) */
#define NS_PER_TICK 10000000ULL

#define FILENAME_LEN 256
#define ARGV_LEN 256

/* member.flags */
#define MEMBER_ROOT 1            /* the payload, admitted from the launcher */
#define MEMBER_KILLED_AT_BIRTH 2 /* born after the seal, SIGKILLed at the fork */
#define MEMBER_BORN_SEALED 4     /* born after the seal, left to the KILL pass (SEAL_AT_FORK) */

/* event.kind */
enum event_kind {
	EVENT_FORK = 1,
	EVENT_EXEC = 2,
	EVENT_EXIT = 3,
	EVENT_KILLED_AT_BIRTH = 4,
};

/* event.flags, beyond the member flags above */
#define EVENT_NOT_STORED 0x100   /* the lineage map was full: not a member */
#define EVENT_PARENT_KILL_FAILED 0x200
#define EVENT_CHILD_KILL_FAILED 0x400
#define EVENT_ARGV_TRUNCATED 0x800

struct member {
	__u64 start_ns; /* task->start_boottime */
	__u64 hold_id;
	__u32 parent;   /* tgid that forked it (the launcher for the payload) */
	__u32 flags;
};

/* config is written by userspace only. */
struct hold_config {
	__u64 hold_id;
	__u64 launcher_start; /* the launcher's start time in ticks (/proc/PID/stat field 22) */
	__u32 launcher;       /* tgid whose children are admitted (the payload); 0: none */
	__u32 sealed;         /* 1: forks by members are killed */
};

/* state is written by the programs only. */
struct hold_state {
	__u64 admitted;        /* members ever admitted */
	__u64 overflow;        /* children the lineage map could not store */
	__u64 lost;            /* ring buffer reservations that failed */
	__u64 killed_at_birth; /* children killed at the fork after the seal */
	__u64 root_start_ns;
	__u32 root;            /* tgid of the payload, 0 before it is forked */
	__u32 roots;           /* children of the launcher admitted */
	/* Entries in the lineage map, counted up before an insert and down
	 * after a delete: never fewer than there are, so 0 means none (the
	 * teardown's account reads this, not the 65,536 buckets). */
	__u64 live;
};

struct event {
	__u32 kind;
	__u32 pid;  /* tgid */
	__u32 ppid; /* the forking tgid for fork events; 0 otherwise */
	__u32 pgid;
	__u32 sid;
	__u32 uid;
	__u64 start_ns; /* task->start_boottime of the process */
	__u64 time_ns;  /* bpf_ktime_get_boot_ns() when it happened */
	__s32 exit_code; /* raw wait status: low 7 bits signal, else code << 8 */
	__u32 flags;
};

struct exec_event {
	struct event hdr;
	__u32 argv_len; /* bytes used in argv: NUL-separated arguments */
	__u32 _pad;
	char filename[FILENAME_LEN];
	char argv[ARGV_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LINEAGE_CAPACITY);
	__type(key, __u32); /* tgid */
	__type(value, struct member);
} lineage SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hold_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hold_state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, EVENTS_BYTES);
} events SEC(".maps");

/* Kept so that bpf2go emits Go types for the event layouts. */
const struct event *unused_event __attribute__((unused));
const struct exec_event *unused_exec_event __attribute__((unused));

#ifndef SEAL_AT_FORK
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, __u64 value) __ksym;
#endif

/* BORN_SEALED is the flag of a member born after the seal. */
#ifdef SEAL_AT_FORK
#define BORN_SEALED MEMBER_BORN_SEALED
#else
#define BORN_SEALED MEMBER_KILLED_AT_BIRTH
#endif

/* Wake the reader only when the buffer is half full (of the size it was
 * loaded with): a wake-up per event costs an inter-processor interrupt (an
 * MSR write, a VM exit on a guest), which on a spawn-heavy payload costs
 * more than everything else here. The reader drains the buffer on its own
 * every 100 ms while events come; the wake-up is for bursts. */
static __always_inline void submit(void *e)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	bpf_ringbuf_submit(e, avail > size / 2 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
}

/* Reserve an event; a full buffer is counted in state.lost, never silent. */
static __always_inline void *reserve(__u64 size)
{
	__u32 zero = 0;
	struct hold_state *st;
	void *e = bpf_ringbuf_reserve(&events, size, 0);

	if (!e) {
		st = bpf_map_lookup_elem(&state, &zero);
		if (st)
			__sync_fetch_and_add(&st->lost, 1);
	}
	return e;
}

static __always_inline void fill(struct event *e, __u32 kind, struct task_struct *t)
{
	struct signal_struct *sig = t->signal;

	e->kind = kind;
	e->pid = t->tgid;
	e->ppid = 0;
	e->pgid = BPF_CORE_READ(sig, pids[PIDTYPE_PGID], numbers[0].nr);
	e->sid = BPF_CORE_READ(sig, pids[PIDTYPE_SID], numbers[0].nr);
	e->uid = BPF_CORE_READ(t, cred, uid.val);
	e->start_ns = t->start_boottime;
	e->time_ns = bpf_ktime_get_boot_ns();
	e->exit_code = 0;
	e->flags = 0;
}

/* forget removes tgid's entry and counts it out of state.live, after the
 * delete and only when this call removed it. */
static __always_inline long forget(struct hold_state *st, __u32 tgid)
{
	long err = bpf_map_delete_elem(&lineage, &tgid);

	if (!err)
		__sync_fetch_and_sub(&st->live, 1);
	return err;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 zero = 0, ptgid = parent->tgid, ctgid = child->tgid;
	struct hold_config *cfg;
	struct hold_state *st;
	struct member m = {}, *pm;
	struct event *e;
	__u32 flags = 0;
	long err;

	/* A new thread is not a new process: its group is already tracked. */
	if (child->pid != child->tgid)
		return 0;
	cfg = bpf_map_lookup_elem(&config, &zero);
	st = bpf_map_lookup_elem(&state, &zero);
	if (!cfg || !st)
		return 0;

	/* Any thread of a member forks a member. The launcher (the hold) is no
	 * member: its children are admitted while it is set (the payload). */
	pm = bpf_map_lookup_elem(&lineage, &ptgid);
	if (pm && pm->start_ns != BPF_CORE_READ(parent, group_leader, start_boottime)) {
		/* An entry for another process that had this pid (its exit went
		 * unseen): identity is (pid, start time), so this parent is no
		 * member. Drop the stale entry; never kill on it. */
		forget(st, ptgid);
		pm = NULL;
	}
	if (pm) {
		if (cfg->sealed)
			flags |= BORN_SEALED;
	} else if (cfg->launcher != 0 && cfg->launcher == ptgid &&
		   BPF_CORE_READ(parent, group_leader, start_boottime) / NS_PER_TICK == cfg->launcher_start) {
		/* The last child is the payload: Go's os/exec may first fork a
		 * short-lived probe child of its own (to check CLONE_PIDFD). */
		__sync_fetch_and_add(&st->roots, 1);
		st->root = ctgid;
		st->root_start_ns = child->start_boottime;
		flags |= MEMBER_ROOT;
	} else {
		return 0;
	}

	m.start_ns = child->start_boottime;
	m.hold_id = cfg->hold_id;
	m.parent = ptgid;
	m.flags = flags;
	__sync_fetch_and_add(&st->live, 1);
	err = bpf_map_update_elem(&lineage, &ctgid, &m, BPF_NOEXIST);
	if (err == -EEXIST) { /* a stale entry for a reused pid: the exit was missed */
		forget(st, ctgid);
		err = bpf_map_update_elem(&lineage, &ctgid, &m, BPF_NOEXIST);
	}
	if (err) {
		__sync_fetch_and_sub(&st->live, 1);
		__sync_fetch_and_add(&st->overflow, 1);
		flags |= EVENT_NOT_STORED;
	} else {
		__sync_fetch_and_add(&st->admitted, 1);
	}

	/* Sealed: the forking member dies at the fork (it is the current
	 * task), and the child at birth (it has not run yet; the kill is
	 * pending when it is first woken), where the kfunc exists. */
	if (flags & BORN_SEALED) {
		if (bpf_send_signal(SIGKILL))
			flags |= EVENT_PARENT_KILL_FAILED;
#ifndef SEAL_AT_FORK
		if (bpf_send_signal_task(child, SIGKILL, PIDTYPE_TGID, 0))
			flags |= EVENT_CHILD_KILL_FAILED;
		__sync_fetch_and_add(&st->killed_at_birth, 1);
#endif
	}

	e = reserve(sizeof(*e));
	if (!e)
		return 0;
	fill(e, (flags & MEMBER_KILLED_AT_BIRTH) ? EVENT_KILLED_AT_BIRTH : EVENT_FORK, child);
	e->ppid = ptgid;
	e->flags = flags;
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct exec_event *e;
	struct mm_struct *mm;
	__u64 len;

	if (!bpf_map_lookup_elem(&lineage, &tgid))
		return 0;
	e = reserve(sizeof(*e));
	if (!e)
		return 0;
	fill(&e->hdr, EVENT_EXEC, p);
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), BPF_CORE_READ(bprm, filename));

	/* The new program's argv sits in its own (current) memory, just copied
	 * there by exec, between mm->arg_start and mm->arg_end. */
	mm = p->mm;
	len = BPF_CORE_READ(mm, arg_end) - BPF_CORE_READ(mm, arg_start);
	if (len > ARGV_LEN) {
		len = ARGV_LEN;
		e->hdr.flags |= EVENT_ARGV_TRUNCATED;
	}
	e->argv_len = 0;
	if (bpf_probe_read_user(e->argv, len, (void *)BPF_CORE_READ(mm, arg_start)) == 0)
		e->argv_len = len;
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 zero = 0, tgid = p->tgid;
	struct signal_struct *sig;
	struct hold_state *st;
	struct member *m;
	struct event *e;
	__u64 start;
	__u32 flags;

	m = bpf_map_lookup_elem(&lineage, &tgid);
	if (!m)
		return 0;
	/* This runs for every thread; the process ends with its last one. */
	sig = p->signal;
	if (BPF_CORE_READ(sig, live.counter) != 0)
		return 0;
	flags = m->flags;
	start = m->start_ns; /* p may be any thread: its own start is not the process's */
	st = bpf_map_lookup_elem(&state, &zero);
	if (!st)
		return 0;
	/* Only the thread that removes the member reports its exit. */
	if (forget(st, tgid))
		return 0;

	e = reserve(sizeof(*e));
	if (!e)
		return 0;
	fill(e, EVENT_EXIT, p);
	e->start_ns = start;
	/* What the parent's wait will see: the group's code after exit_group
	 * or a fatal signal, else the leader's own. */
	if (BPF_CORE_READ(sig, flags) & SIGNAL_GROUP_EXIT)
		e->exit_code = BPF_CORE_READ(sig, group_exit_code);
	else
		e->exit_code = BPF_CORE_READ(p, group_leader, exit_code);
	e->flags = flags;
	submit(e);
	return 0;
}
