//go:build ignore

/* devscan.bpf.c finds the open files that are one of a set of device nodes,
 * in the kernel: an iter/task_file program visits every file of every fd
 * table on the host (threads that share their leader's table are visited
 * once) and writes one record per file whose inode is a character or block
 * device of the targets map, keyed by kind and device number. A node is
 * matched by the device it stands for, so another node for the same device
 * (say inside a container) matches too, and a file opened with O_PATH is
 * seen like any other. Userspace reads the records from the iterator and
 * checks only the processes they name. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char __license[] SEC("license") = "GPL";

#define S_IFMT 00170000
#define S_IFCHR 0020000
#define S_IFBLK 0060000

#define KIND_CHAR 1
#define KIND_BLOCK 2

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)


struct inode {
	unsigned short i_mode;
	unsigned int i_rdev;
};

struct file {
	struct inode *f_inode;
};

struct task_struct {
	int pid;
	int tgid;
	unsigned long long start_boottime;
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

#pragma clang attribute pop

/* dev_key is a device node's kind (KIND_CHAR, KIND_BLOCK) and number. */
struct dev_key {
	__u32 kind;
	__u32 rdev;
};

/* dev_match is one record: a file of the targets, the fd it is open as and
 * the task whose fd table has it. */
struct dev_match {
	__u32 tgid;
	__u32 tid;
	__u32 fd;
	__u32 kind;
	__u32 rdev;
	__u32 _pad;
	__u64 start_ns; /* task->start_boottime */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct dev_key);
	__type(value, __u8);
} targets SEC(".maps");

/* Kept so that bpf2go emits a Go type for the record. */
const struct dev_match *unused_dev_match __attribute__((unused));

SEC("iter/task_file")
int find_device_files(struct bpf_iter__task_file *ctx)
{
	struct task_struct *task = ctx->task;
	struct file *file = ctx->file;
	struct dev_key key = {};
	struct dev_match m = {};
	struct inode *inode;
	unsigned short mode;

	if (!task || !file)
		return 0;
	/* The iterator's task and file are trusted pointers: read directly
	 * (the verifier makes these faulting loads), no helper call per file. */
	inode = file->f_inode;
	if (!inode)
		return 0;
	mode = inode->i_mode & S_IFMT;
	if (mode == S_IFCHR)
		key.kind = KIND_CHAR;
	else if (mode == S_IFBLK)
		key.kind = KIND_BLOCK;
	else
		return 0;
	key.rdev = inode->i_rdev;
	if (!bpf_map_lookup_elem(&targets, &key))
		return 0;
	m.tgid = task->tgid;
	m.tid = task->pid;
	m.fd = ctx->fd;
	m.kind = key.kind;
	m.rdev = key.rdev;
	m.start_ns = task->start_boottime;
	bpf_seq_write(ctx->meta->seq, &m, sizeof(m));
	return 0;
}
