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
