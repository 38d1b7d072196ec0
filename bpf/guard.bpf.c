//go:build ignore

/* guard.bpf.c is the guard's enforcement at open: a BPF_PROG_TYPE_CGROUP_DEVICE
 * program, attached by `gpu-hold guard --deny-at-open` to the root of the
 * cgroup v2 hierarchy, where it runs for every process of the host (those in
 * the root cgroup too) at each open or mknod of a device node. A node that
 * is not guarded is allowed. A guarded one (its type, major and minor in
 * `guarded`) is allowed only to a process the guard lets through:
 *
 *   lineage       the token holders' pinned lineage maps (inner maps the
 *                 guard swaps in, one slot per resource: their members,
 *                 newborns included, as each holder's own tracker admits them);
 *   holders       every process below a holder's gpu-hold process (named by
 *                 tgid and start time) or below any process running the
 *                 gpu-hold executable (launchers, by inode: a hold's payload
 *                 before the guard has even seen its ticket), its parents'
 *                 chain read from the kernel at the open, up to ANCESTRY
 *                 levels; a payload is let through from its first
 *                 instruction. A gpu-hold process starts a payload only once
 *                 it holds its token; a payload of another resource's hold
 *                 that is let through here is still named, and ended, by
 *                 the guard's scan;
 *   cgroups       the holder's cgroup (by id: its members, newborns included);
 *   tgids         the holder's gpu-hold process, the lineage the guard walked
 *                 (holds without a pin or cgroup) and the allow-listed by exe;
 *   uids          the allow-listed by uid.
 *
 * Anyone else gets EPERM at open, before the driver runs, and the denial is
 * streamed to the guard. The program is attached through a BPF link the
 * guard holds: when the guard exits, in any way, the link is closed and the
 * program detached, and every open is allowed again (fail-open: a guard bug
 * never locks the host out of its devices). */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

/* The task fields the ancestry walk reads (CO-RE: the kernel's own layout). */
struct super_block___guard {
	unsigned int s_dev;
} __attribute__((preserve_access_index));

struct inode___guard {
	unsigned long i_ino;
	struct super_block___guard *i_sb;
} __attribute__((preserve_access_index));

struct file___guard {
	struct inode___guard *f_inode;
} __attribute__((preserve_access_index));

struct mm_struct___guard {
	struct file___guard *exe_file;
} __attribute__((preserve_access_index));

struct task_struct___guard {
	int tgid;
	unsigned long long start_boottime;
	struct task_struct___guard *real_parent;
	struct task_struct___guard *group_leader;
	struct mm_struct___guard *mm;
} __attribute__((preserve_access_index));

/* exe_key names an executable by its inode: the kernel's dev_t of its file
 * system and its inode number. */
struct exe_key {
	__u64 ino;
	__u32 dev;
	__u32 pad;
};

/* ANCESTRY is how far up the walk looks for a holder. */
#define ANCESTRY 32

char __license[] SEC("license") = "GPL";

struct dev_key {
	__u32 type; /* BPF_DEVCG_DEV_CHAR or BPF_DEVCG_DEV_BLOCK */
	__u32 major;
	__u32 minor;
};

/* member is the lineage map's value (lineage.bpf.c); only its presence is read. */
struct member {
	__u64 start_ns;
	__u64 hold_id;
	__u32 parent;
	__u32 flags;
};

/* denial is one open refused, for the guard's log and audit. */
struct denial {
	__u32 tgid;
	__u32 uid;
	__u32 type;
	__u32 major;
	__u32 minor;
	__u32 access;
};

/* For bpf2go's -type denial: the ring buffer carries no type. */
const struct denial *unused_denial __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct dev_key);
	__type(value, __u8);
} guarded SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u8);
} uids SEC(".maps");

/* launchers: the gpu-hold executable(s), by inode. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8);
	__type(key, struct exe_key);
	__type(value, __u8);
} launchers SEC(".maps");

/* holders: tgid -> start time in clock ticks (/proc/PID/stat field 22), so
 * that a pid reused since the guard looked does not count. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} holders SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, __u8);
} cgroups SEC(".maps");

/* member_shape is never used: a top-level map whose value is struct member
 * makes clang emit that struct in full, which the inner map's definition
 * below then refers to (there, alone, it would be a bare declaration). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct member);
} member_shape SEC(".maps");

/* The inner map's shape is the lineage map's (LINEAGE_CAPACITY members).
 * Its value is a struct, as the lineage map's is: before 6.2 the kernel
 * compares an inner map's timer_off with the template's, and that is
 * -ENOENT for a struct value but -EINVAL for a byte array, so on 6.1 a
 * lineage map would not go in (EINVAL) under a byte-array template. */
struct lineage_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct member);
};

/* LINEAGE_SLOTS is how many resources' holders can have their lineage in. */
#define LINEAGE_SLOTS 8

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, LINEAGE_SLOTS);
	__type(key, __u32);
	__array(values, struct lineage_map);
} lineage SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} denials SEC(".maps");

/* REPORT_NS: a process refused again and again is streamed once in this
 * long (a retry loop must not wake the guard at every open); every refusal
 * is counted in refused. reported is an LRU: forgetting a process only
 * streams it once more. */
#define REPORT_NS 1000000000ULL

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} reported SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} refused SEC(".maps");

/* below_holder says whether the current task is a holder or descends from one. */
static __always_inline int below_holder(void) {
	struct task_struct___guard *t = (void *)bpf_get_current_task();
	struct exe_key ek = {};
	struct inode___guard *ino;
	__u64 *start;
	__u32 tgid;

	for (int i = 0; i < ANCESTRY; i++) {
		if (!t)
			return 0;
		tgid = BPF_CORE_READ(t, tgid);
		if (tgid <= 1)
			return 0;
		start = bpf_map_lookup_elem(&holders, &tgid);
		/* A parent may be a thread: the process's start is its leader's. */
		if (start && *start == BPF_CORE_READ(t, group_leader, start_boottime) / 10000000ULL)
			return 1;
		ino = BPF_CORE_READ(t, mm, exe_file, f_inode);
		if (ino) {
			ek.ino = BPF_CORE_READ(ino, i_ino);
			ek.dev = BPF_CORE_READ(ino, i_sb, s_dev);
			if (bpf_map_lookup_elem(&launchers, &ek))
				return 1;
		}
		t = BPF_CORE_READ(t, real_parent);
	}
	return 0;
}

/* allowed says whether the current process may open a guarded node. */
static __always_inline int allowed(__u32 tgid, __u32 uid) {
	struct member *m;
	__u64 cg;
	void *inner;

	if (bpf_map_lookup_elem(&tgids, &tgid) || bpf_map_lookup_elem(&uids, &uid))
		return 1;
	cg = bpf_get_current_cgroup_id();
	if (bpf_map_lookup_elem(&cgroups, &cg))
		return 1;
	if (below_holder())
		return 1;
#pragma unroll
	for (__u32 i = 0; i < LINEAGE_SLOTS; i++) {
		__u32 slot = i;
		inner = bpf_map_lookup_elem(&lineage, &slot);
		if (!inner)
			continue;
		m = bpf_map_lookup_elem(inner, &tgid);
		if (m)
			return 1;
	}
	return 0;
}

SEC("cgroup/dev")
int guard_dev(struct bpf_cgroup_dev_ctx *ctx) {
	struct dev_key k = {};
	struct denial *d;
	__u64 *count, *last, now;
	__u32 tgid, uid, zero = 0;

	k.type = ctx->access_type & 0xFFFF;
	k.major = ctx->major;
	k.minor = ctx->minor;
	if (!bpf_map_lookup_elem(&guarded, &k))
		return 1;
	tgid = bpf_get_current_pid_tgid() >> 32;
	uid = (__u32)bpf_get_current_uid_gid();
	if (allowed(tgid, uid))
		return 1;
	count = bpf_map_lookup_elem(&refused, &zero);
	if (count)
		*count += 1;
	now = bpf_ktime_get_ns();
	last = bpf_map_lookup_elem(&reported, &tgid);
	if (last && now - *last < REPORT_NS)
		return 0;
	bpf_map_update_elem(&reported, &tgid, &now, BPF_ANY);
	d = bpf_ringbuf_reserve(&denials, sizeof(*d), 0);
	if (d) {
		d->tgid = tgid;
		d->uid = uid;
		d->type = k.type;
		d->major = k.major;
		d->minor = k.minor;
		d->access = ctx->access_type >> 16;
		bpf_ringbuf_submit(d, 0);
	}
	return 0;
}
