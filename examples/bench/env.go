package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// Env is what the run knows about the machine.
type Env struct {
	Date   string `json:"date"`
	Go     string `json:"go"`
	OS     string `json:"os"`
	CPUs   int    `json:"cpus"`
	CPU    string `json:"cpu"`
	MemMiB int64  `json:"mem_mib"`
	Dir    string `json:"dir"`
	Disk   string `json:"disk"` // device, filesystem, rotational or not
	Load   string `json:"load"` // /proc/loadavg when the run started: other work on the machine
}

func environment(dir string) Env {
	e := Env{
		Date: time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Go:   runtime.Version(),
		OS:   runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(),
		CPU:  procField("/proc/cpuinfo", "model name"),
		Dir:  dir,
	}
	var kb int64
	fmt.Sscanf(procField("/proc/meminfo", "MemTotal"), "%d", &kb)
	e.MemMiB = kb >> 10
	e.Disk = diskOf(dir)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		e.Load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return e
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// diskOf describes the device and filesystem holding dir, from /proc/mounts
// and /sys/block.
func diskOf(dir string) string {
	abs, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "unknown"
	}
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "unknown"
	}
	var dev, mnt, fstype string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if (abs == f[1] || strings.HasPrefix(abs, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) >= len(mnt) {
			dev, mnt, fstype = f[0], f[1], f[2]
		}
	}
	name := filepath.Base(dev)
	kind := "rotational unknown"
	if r, err := os.ReadFile("/sys/block/" + name + "/queue/rotational"); err == nil {
		kind = "rotational=" + strings.TrimSpace(string(r))
	}
	if strings.HasPrefix(name, "vd") {
		kind += ", virtio (a VM's virtual disk)"
	}
	return fmt.Sprintf("%s %s on %s, %s", dev, fstype, mnt, kind)
}
