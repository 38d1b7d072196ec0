//go:build ignore

/* devwatch.bpf.c keeps the host's account of who may hold a watched device,
 * so that the device-holder check reads a few processes instead of every fd
 * table on the host. Attached once per boot and pinned (devwatch.go):
 *
 *   watch_open   cgroup/dev at the root of the cgroup v2 hierarchy: runs at
 *                every open of a device node by any process of the host (and
 *                at access(2) and mknod(2)). For a watched device it adds the
 *                opener (tgid, start time) to `openers`, and the dentry it
 *                opens through (the path walk's, current->nameidata) to
 *                `dentries`. It never refuses: it always returns 1.
 *   watch_fork   tp_btf/sched_process_fork: the child of an opener is an
 *                opener (it inherits the fd table).
 *   watch_install, watch_replace  fentry on fd_install and replace_fd, the
 *                ways a file enters an fd table other than an open or a
 *                fork (SCM_RIGHTS, pidfd_getfd, seccomp's addfd, binder,
 *                F_DUPFD): a process given a file of a watched device is an
 *                opener. Optional: where fentry is refused, the account
 *                credits no sleeping call (devwatch_inflight.go says why).
 *
 * and four iterators that read the kernel's own reference counts, which
 * userspace checks against what the openers hold:
 *
 *   account_files  iter/task_file: one record per open file of a watched
 *                  device, with the file's reference count, its fd table and
 *                  its dentry's reference count (run on one process, or on
 *                  the whole host for a seed);
 *   account_vmas   iter/task_vma: one record per mapping of such a file
 *                  (each holds a reference to it);
 *   read_dentries  iter/task, run on the reader alone: each dentry of
 *                  `dentries`, its count, and whether it still names a
 *                  watched device;
 *   account_threads  iter/task, run on one opener: each of its threads that
 *                  sleeps in the kernel, with its fd table and the system
 *                  call and first argument it entered with.
 *
 * A map that is full counts its loss in `state`: the account is then not
 * trusted until the next seed. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char __license[] SEC("license") = "GPL";

#define S_IFMT 00170000
#define S_IFCHR 0020000
#define S_IFBLK 0060000

#define KIND_CHAR 1
#define KIND_BLOCK 2

#define EEXIST 17

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct inode {
	unsigned short i_mode;
	unsigned int i_rdev;
};

struct lockref {
	int count;
};

struct dentry {
	struct inode *d_inode;
	struct lockref d_lockref;
};

struct path {
	struct dentry *dentry;
};

/* Linux 6.13 and later count a file's references in f_ref (file_ref_t: the
 * count less one), before that in f_count. */
struct file {
	struct inode *f_inode;
	struct path f_path;
};

struct file___ref {
	struct {
		struct {
			long counter;
		} refcnt;
	} f_ref;
};

struct file___count {
	struct {
		long counter;
	} f_count;
};

struct nameidata {
	struct path path;
};

struct files_struct {
	struct {
		int counter;
	} count;
};

struct mm_struct {
	int _unused;
};

struct task_struct {
	unsigned int __state;
	int pid;
	int tgid;
	unsigned long long start_boottime;
	struct task_struct *group_leader;
	struct files_struct *files;
	struct nameidata *nameidata;
};

struct vm_area_struct {
	unsigned long vm_start;
	struct mm_struct *vm_mm;
	struct file *vm_file;
};

struct bpf_iter_meta {
	void *seq;
};

struct bpf_iter__task_file {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	__u32 fd;
	struct file *file;
};

struct bpf_iter__task_vma {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
	struct vm_area_struct *vma;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

struct pt_regs;

/* The registers saved at entry: the system call's number and first
 * argument, per architecture (CO-RE picks the one the kernel has). */
struct pt_regs___x86 {
	unsigned long orig_ax;
	unsigned long di;
};

struct pt_regs___arm64 {
	unsigned long long orig_x0;
	int syscallno;
};

#pragma clang attribute pop

/* dev_key is a device node's kind (KIND_CHAR, KIND_BLOCK) and number. */
struct dev_key {
	__u32 kind;
	__u32 rdev;
};

/* opener_key names a process by tgid and its leader's start_boottime. */
struct opener_key {
	__u32 tgid;
	__u32 _pad;
	__u64 start_ns;
};

/* dentry_info is what is known of a dentry a watched device was opened
 * through. structural (set by userspace at a seed) is the part of its count
 * that no open file holds (mounts on it, mappings of closed files). */
struct dentry_info {
	__s64 structural;
	__u32 known; /* structural is set */
	__u32 kind;
	__u32 rdev;
	__u32 _pad;
};

/* watch_state counts what the maps could not hold: state[0] is the
 * programs', state[1] what userspace saw of it when it last seeded. */
struct watch_state {
	__u64 lost_openers;
	__u64 lost_dentries;
	__u64 opens;
	__u64 forks;
};

/* file_rec is one open file of a watched device in one fd table. */
struct file_rec {
	__u32 tgid;
	__u32 tid;
	__u32 fd;
	__u32 kind;
	__u32 rdev;
	__s32 dcount;
	__u64 start_ns;
	__u64 file;
	__u64 files;
	__u64 fcount;
	__u64 dentry;
};

/* vma_rec is one mapping of such a file. */
struct vma_rec {
	__u32 tgid;
	__u32 kind;
	__u32 rdev;
	__u32 _pad;
	__u64 file;
	__u64 mm;
	__u64 vm_start;
	__u64 fcount;
};

/* dentry_rec is one tracked dentry as it is now. */
struct dentry_rec {
	__u64 dentry;
	__s64 structural; /* as dentries holds it */
	__s32 count;
	__u32 known;
	__u32 watched; /* its inode is still a watched device */
	__u32 kind;    /* the device it was tracked for */
	__u32 rdev;
	__u32 _pad;
};

/* thread_rec is one thread of an opener that sleeps in the kernel. */
struct thread_rec {
	__u32 tgid;
	__u32 tid;
	__u64 files;
	__s32 files_count;
	__u32 _pad;
	__s64 nr;   /* the system call it entered with; -1: none */
	__u64 arg0; /* its first argument */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct dev_key);
	__type(value, __u8); /* 0 watched, 1 seeded */
} watched SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct opener_key);
	__type(value, __u8);
} openers SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct dentry_info);
} dentries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct watch_state);
} state SEC(".maps");

/* Kept so that bpf2go emits Go types for the records. */
const struct file_rec *unused_file_rec __attribute__((unused));
const struct vma_rec *unused_vma_rec __attribute__((unused));
const struct dentry_rec *unused_dentry_rec __attribute__((unused));
const struct thread_rec *unused_thread_rec __attribute__((unused));

static struct watch_state *watch_state(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&state, &zero);
}

/* inode_key fills k from an inode that is a character or block device. */
static int inode_key(struct inode *inode, struct dev_key *k)
{
	unsigned short mode;

	if (!inode)
		return -1;
	mode = BPF_CORE_READ(inode, i_mode) & S_IFMT;
	if (mode == S_IFCHR)
		k->kind = KIND_CHAR;
	else if (mode == S_IFBLK)
		k->kind = KIND_BLOCK;
	else
		return -1;
	k->rdev = BPF_CORE_READ(inode, i_rdev);
	return 0;
}

/* watched_file fills k when file is of a watched device. */
static int watched_file(struct file *file, struct dev_key *k)
{
	if (!file || inode_key(BPF_CORE_READ(file, f_inode), k))
		return 0;
	return bpf_map_lookup_elem(&watched, k) != 0;
}

static __u64 file_refs(struct file *file)
{
	if (bpf_core_field_exists(struct file___ref, f_ref))
		return BPF_CORE_READ((struct file___ref *)file, f_ref.refcnt.counter) + 1;
	return BPF_CORE_READ((struct file___count *)file, f_count.counter);
}

static void add_opener(__u32 tgid, __u64 start_ns, struct watch_state *st)
{
	struct opener_key k = {.tgid = tgid, .start_ns = start_ns};
	__u8 one = 1;

	if (bpf_map_update_elem(&openers, &k, &one, BPF_ANY) && st)
		__sync_fetch_and_add(&st->lost_openers, 1);
}

/* add_dentry tracks the dentry an open walks to, when it is the node of
 * the device being opened (a path walk's dentry, not a stale one). */
static void add_dentry(struct dentry *d, struct dev_key *k, struct watch_state *st)
{
	struct dentry_info info = {.kind = k->kind, .rdev = k->rdev};
	struct dev_key dk = {};
	__u64 key = (__u64)d;
	long err;

	if (!d || inode_key(BPF_CORE_READ(d, d_inode), &dk) || dk.kind != k->kind || dk.rdev != k->rdev)
		return;
	err = bpf_map_update_elem(&dentries, &key, &info, BPF_NOEXIST);
	if (err && err != -EEXIST && st)
		__sync_fetch_and_add(&st->lost_dentries, 1);
}

SEC("cgroup/dev")
int watch_open(struct bpf_cgroup_dev_ctx *ctx)
{
	__u32 type = ctx->access_type & 0xFFFF, access = ctx->access_type >> 16;
	struct watch_state *st;
	struct task_struct *task;
	struct dev_key k = {};

	if (!(access & (BPF_DEVCG_ACC_READ | BPF_DEVCG_ACC_WRITE)))
		return 1; /* mknod opens nothing */
	k.kind = type == BPF_DEVCG_DEV_CHAR ? KIND_CHAR : KIND_BLOCK;
	k.rdev = ctx->major << 20 | ctx->minor;
	if (!bpf_map_lookup_elem(&watched, &k))
		return 1;
	st = watch_state();
	if (st)
		__sync_fetch_and_add(&st->opens, 1);
	task = (struct task_struct *)bpf_get_current_task();
	add_opener(BPF_CORE_READ(task, tgid), BPF_CORE_READ(task, group_leader, start_boottime), st);
	/* An open walks a path (nameidata); access(2) has none left. */
	add_dentry(BPF_CORE_READ(task, nameidata, path.dentry), &k, st);
	return 1;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(watch_fork, struct task_struct *parent, struct task_struct *child)
{
	struct opener_key pk = {};
	struct watch_state *st;

	if (child->pid != child->tgid)
		return 0; /* a thread shares its process's table */
	pk.tgid = parent->tgid;
	pk.start_ns = BPF_CORE_READ(parent, group_leader, start_boottime);
	if (!bpf_map_lookup_elem(&openers, &pk))
		return 0;
	st = watch_state();
	if (st)
		__sync_fetch_and_add(&st->forks, 1);
	add_opener(child->tgid, child->start_boottime, st);
	return 0;
}

/* installed makes the current process an opener when file, just put in
 * its fd table, is of a watched device. */
static void installed(struct file *file)
{
	struct task_struct *task;
	struct dev_key k = {};

	if (!watched_file(file, &k))
		return;
	task = (struct task_struct *)bpf_get_current_task();
	add_opener(BPF_CORE_READ(task, tgid), BPF_CORE_READ(task, group_leader, start_boottime), watch_state());
}

SEC("fentry/fd_install")
int BPF_PROG(watch_install, unsigned int fd, struct file *file)
{
	installed(file);
	return 0;
}

SEC("fentry/replace_fd")
int BPF_PROG(watch_replace, unsigned int fd, struct file *file, unsigned int flags)
{
	installed(file);
	return 0;
}

SEC("iter/task_file")
int account_files(struct bpf_iter__task_file *ctx)
{
	struct task_struct *task = ctx->task;
	struct file *file = ctx->file;
	struct file_rec r = {};
	struct dev_key k = {};
	struct dentry *d;

	if (!task || !watched_file(file, &k))
		return 0;
	d = BPF_CORE_READ(file, f_path.dentry);
	r.tgid = task->tgid;
	r.tid = task->pid;
	r.fd = ctx->fd;
	r.kind = k.kind;
	r.rdev = k.rdev;
	r.start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	r.file = (__u64)file;
	r.files = (__u64)BPF_CORE_READ(task, files);
	r.fcount = file_refs(file) - 1; /* less the iterator's own, held while it runs */
	r.dentry = (__u64)d;
	r.dcount = BPF_CORE_READ(d, d_lockref.count);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

SEC("iter/task_vma")
int account_vmas(struct bpf_iter__task_vma *ctx)
{
	struct task_struct *task = ctx->task;
	struct vm_area_struct *vma = ctx->vma;
	struct vma_rec r = {};
	struct dev_key k = {};
	struct file *file;

	if (!task || !vma)
		return 0;
	file = BPF_CORE_READ(vma, vm_file);
	if (!watched_file(file, &k))
		return 0;
	r.tgid = task->tgid;
	r.kind = k.kind;
	r.rdev = k.rdev;
	r.file = (__u64)file;
	r.mm = (__u64)BPF_CORE_READ(vma, vm_mm);
	r.vm_start = BPF_CORE_READ(vma, vm_start);
	r.fcount = file_refs(file);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

struct dentry_walk {
	void *seq;
};

static long read_dentry(void *map, __u64 *key, struct dentry_info *info, struct dentry_walk *w)
{
	struct dentry_rec r = {};
	struct dev_key k = {};
	struct dentry *d = (struct dentry *)*key;

	r.dentry = *key;
	r.structural = info->structural;
	r.known = info->known;
	r.count = BPF_CORE_READ(d, d_lockref.count);
	r.watched = !inode_key(BPF_CORE_READ(d, d_inode), &k) && k.kind == info->kind && k.rdev == info->rdev;
	r.kind = info->kind;
	r.rdev = info->rdev;
	bpf_seq_write(w->seq, &r, sizeof(r));
	return 0;
}

/* read_dentries runs on one task (the reader's, by the link's task filter)
 * and writes every tracked dentry as it is now. */
SEC("iter/task")
int read_dentries(struct bpf_iter__task *ctx)
{
	struct dentry_walk w = {.seq = ctx->meta->seq};
	struct task_struct *task = ctx->task;

	/* The filter names a process: each of its threads comes here. */
	if (!task || task->pid != task->tgid)
		return 0;
	bpf_for_each_map_elem(&dentries, read_dentry, &w, 0);
	return 0;
}

#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2

/* entry reads the system call a sleeping task entered the kernel with. A
 * task sleeps only in the kernel, so the registers saved at the top of its
 * stack are those of the entry it sleeps in (an interrupt's or a fault's
 * has nr -1). */
static void entry(struct task_struct *task, struct thread_rec *r)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	r->nr = -1;
	if (!regs)
		return;
	if (bpf_core_field_exists(((struct pt_regs___x86 *)0)->orig_ax)) {
		r->nr = (long)BPF_CORE_READ((struct pt_regs___x86 *)regs, orig_ax);
		r->arg0 = BPF_CORE_READ((struct pt_regs___x86 *)regs, di);
	} else if (bpf_core_field_exists(((struct pt_regs___arm64 *)0)->syscallno)) {
		r->nr = BPF_CORE_READ((struct pt_regs___arm64 *)regs, syscallno);
		r->arg0 = BPF_CORE_READ((struct pt_regs___arm64 *)regs, orig_x0);
	}
}

/* account_threads runs on one opener (the link's task filter) and writes
 * each of its threads that sleeps in the kernel. */
SEC("iter/task")
int account_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct thread_rec r = {};

	if (!task || !bpf_core_field_exists(task->__state))
		return 0;
	if (!(BPF_CORE_READ(task, __state) & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE)))
		return 0;
	r.tgid = task->tgid;
	r.tid = task->pid;
	r.files = (__u64)BPF_CORE_READ(task, files);
	r.files_count = BPF_CORE_READ(task, files, count.counter);
	entry(task, &r);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}
