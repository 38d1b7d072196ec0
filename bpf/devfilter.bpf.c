//go:build ignore

/* devfilter.bpf.c is a pool hold's cgroup device filter: attached to the
 * payload's cgroup (BPF_PROG_TYPE_CGROUP_DEVICE), it denies every access
 * (open, mknod) to a device whose (type, major, minor) is in the deny map,
 * the nodes of the pool's devices the hold was not given, and allows the
 * rest: the devices it was given, the nodes the pool shares, and every
 * other device of the host. Programs attached above the payload's cgroup
 * still run: the kernel allows only what all of them allow. */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* dev_key is one device: BPF_DEVCG_DEV_CHAR or _BLOCK, major, minor. */
struct dev_key {
	__u32 type;
	__u32 major;
	__u32 minor;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct dev_key);
	__type(value, __u8);
} denied SEC(".maps");

SEC("cgroup/dev")
int devfilter(struct bpf_cgroup_dev_ctx *ctx)
{
	struct dev_key key = {
		.type = ctx->access_type & 0xffff,
		.major = ctx->major,
		.minor = ctx->minor,
	};

	if (bpf_map_lookup_elem(&denied, &key))
		return 0;
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
