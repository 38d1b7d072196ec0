/* types.h owns the kernel types lineage.bpf.c reads: only the fields it
 * reads, marked preserve_access_index so that CO-RE relocates every access
 * against the running kernel's BTF (/sys/kernel/btf/vmlinux). It replaces a
 * full vmlinux.h. */
#ifndef GPU_HOLD_TYPES_H
#define GPU_HOLD_TYPES_H

typedef int pid_t;

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	int counter;
} atomic_t;

typedef struct {
	unsigned int val;
} kuid_t;

/* enum pid_type indexes signal_struct.pids and is the third argument of the
 * kfunc bpf_send_signal_task. */
enum pid_type {
	PIDTYPE_PID,
	PIDTYPE_TGID,
	PIDTYPE_PGID,
	PIDTYPE_SID,
	PIDTYPE_MAX,
};

/* upid.nr in numbers[0] is the pid in the initial pid namespace. */
struct upid {
	int nr;
};

struct pid {
	struct upid numbers[1];
};

struct signal_struct {
	atomic_t live; /* threads not yet past do_exit: 0 means the group is dead */
	unsigned int flags;  /* SIGNAL_GROUP_EXIT */
	int group_exit_code; /* wait status after exit_group or a fatal signal */
	struct pid *pids[PIDTYPE_MAX];
};

struct cred {
	kuid_t uid;
};

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
};

struct linux_binprm {
	const char *filename;
};

struct task_struct {
	int pid;  /* thread id */
	int tgid; /* process id */
	int exit_code;
	unsigned long long start_boottime; /* ns since boot; /proc/PID/stat field 22 is this / (1e9/USER_HZ) */
	struct task_struct *group_leader;
	struct signal_struct *signal;
	const struct cred *cred;
	struct mm_struct *mm;
};

#pragma clang attribute pop

#endif
