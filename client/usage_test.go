package client

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGPUUse(t *testing.T) {
	if got := GPUList(" 0, 2,x,"); !cmp.Equal(got, []int{0, 2}) {
		t.Errorf("GPUList = %v", got)
	}
	util := []GPUUtilization{{Index: 0, Percent: 40, MemoryUsedBytes: 1, MemoryTotalBytes: 10},
		{Index: 2, Percent: 80, MemoryUsedBytes: 3, MemoryTotalBytes: 10}}
	if u, ok := UseOf([]int{0, 2}, util); !ok || u != (GPUUse{Percent: 60, UsedBytes: 4, TotalBytes: 20}) {
		t.Errorf("UseOf 0,2 = %+v, %v", u, ok)
	}
	if _, ok := UseOf([]int{1}, util); ok {
		t.Error("an unmeasured GPU has a use")
	}
}
