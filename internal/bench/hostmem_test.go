package main

import "testing"

// smaps_rollup opens with an address line that is not a field; Private
// is both of its kinds.
func TestSmapsMem(t *testing.T) {
	data := `55e755c3d000-7ffe53f15000 ---p 00000000 00:00 0                          [rollup]
Rss:                1696 kB
Pss:                 540 kB
Pss_Anon:            116 kB
Shared_Clean:       1484 kB
Private_Clean:        96 kB
Private_Dirty:       116 kB
`
	m, ok := smapsMem(parseKB(data))
	if !ok || m != (procMem{RSS: 1696, PSS: 540, Private: 212}) {
		t.Fatalf("smapsMem = %+v, %v", m, ok)
	}
	if _, ok := smapsMem(parseKB("Rss: 1 kB\nPss: 1 kB\n")); ok {
		t.Fatal("a rollup without Private_* lines was accepted")
	}
}

// meminfo's kernel lines grow by after - before; counts without a unit
// parse, other shapes are skipped.
func TestKernelGrowth(t *testing.T) {
	before := parseKB("MemAvailable:   24203144 kB\nSlab:             249292 kB\nKernelStack:        1400 kB\nPageTables:         3044 kB\nHugePages_Total:       0\nbogus line\nx: 1 MB\n")
	after := parseKB("MemAvailable:   24100000 kB\nSlab:             250292 kB\nKernelStack:        1600 kB\nPageTables:         3344 kB\n")
	if before["HugePages_Total"] != 0 || len(before) != 5 {
		t.Fatalf("parseKB = %v", before)
	}
	by, sum := kernelGrowth(before, after)
	if sum != 1500 || by["Slab"] != 1000 || by["KernelStack"] != 200 || by["PageTables"] != 300 {
		t.Fatalf("kernelGrowth = %v, %v", by, sum)
	}
}

// A BPF map's fdinfo gives its id and memlock; a plain file's gives none.
func TestFdMemlock(t *testing.T) {
	ring := "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t2086\nmap_type:\t27\nkey_size:\t0\nvalue_size:\t0\nmax_entries:\t4194304\nmap_flags:\t0x0\nmap_extra:\t0x0\nmemlock:\t4223304\nmap_id:\t81929\nfrozen:\t0\n"
	id, kib, ok := fdMemlock(ring)
	if !ok || id != "map_id:81929" || kib != 4223304.0/1024 {
		t.Fatalf("fdMemlock(ring buffer) = %q, %v, %v", id, kib, ok)
	}
	if _, _, ok := fdMemlock("pos:\t0\nflags:\t0100000\nmnt_id:\t26\nino:\t1234\n"); ok {
		t.Fatal("a plain file's fdinfo gave a BPF object")
	}
}
