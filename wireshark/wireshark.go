// Package wireshark ships lumina.lua, a Wireshark post-dissector for Lumina's mirror metadata (event, mirror
// sequence number, switch ingress timestamp; the ITER and connection of a results trace's comments) and for the
// RoCEv2 CNP fields Wireshark leaves undecoded, and installs it into Wireshark's personal Lua plugins folder.
package wireshark

import (
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Script is lumina.lua.
//
//go:embed lumina.lua
var Script []byte

// FileName is the name the script is installed under.
const FileName = "lumina.lua"

// PluginDir returns Wireshark's personal Lua plugins folder: as tshark reports it (`tshark -G folders`,
// "Personal Lua Plugins") when tshark is on the PATH, else Wireshark's documented default for the system
// (~/.local/lib/wireshark/plugins; %APPDATA%\Wireshark\plugins on Windows). from says which.
func PluginDir() (dir, from string, err error) {
	if tshark, err := exec.LookPath("tshark"); err == nil {
		out, err := exec.Command(tshark, "-G", "folders").Output()
		if err == nil {
			if d, ok := personalLua(out); ok {
				return d, "tshark -G folders", nil
			}
		}
	}
	if runtime.GOOS == "windows" {
		if app := os.Getenv("APPDATA"); app != "" {
			return filepath.Join(app, "Wireshark", "plugins"), "default", nil
		}
		return "", "", errors.New("APPDATA is not set: give the plugins folder with --dir")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", "", fmt.Errorf("no home directory (%v): give the plugins folder with --dir", err)
	}
	return filepath.Join(home, ".local", "lib", "wireshark", "plugins"), "default", nil
}

// personalLua reads the "Personal Lua Plugins:" line of `tshark -G folders`.
func personalLua(out []byte) (string, bool) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "Personal Lua Plugins" {
			if v = strings.TrimSpace(v); v != "" {
				return v, true
			}
		}
	}
	return "", false
}

// ErrNotOurs is wrapped by Install's error when the file it would replace is not a copy of lumina.lua.
var ErrNotOurs = errors.New("not lumina's script")

// header is the first line of lumina.lua, which every shipped version starts with.
func header() []byte {
	h, _, _ := bytes.Cut(Script, []byte("\n"))
	return h
}

// Install writes the script into dir (created if missing) as FileName, replacing an older copy whole (a
// temporary file renamed). It reports whether it wrote anything: an identical copy is left alone. An existing
// FileName that is not an older copy of the script (its first line is not the shipped header), or not a regular
// file (a symlink), is replaced only with force; otherwise the error wraps ErrNotOurs.
func Install(dir string, force bool) (path string, changed bool, err error) {
	path = filepath.Join(dir, FileName)
	st, err := os.Lstat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		if !force {
			return path, false, fmt.Errorf("%s is a %s, not a copy of lumina.lua: %w; remove it or install with --force to replace it", path, kind(st.Mode()), ErrNotOurs)
		}
	case err == nil:
		cur, err := os.ReadFile(path)
		if err != nil {
			return path, false, fmt.Errorf("reading %s: %w", path, err)
		}
		if bytes.Equal(cur, Script) {
			return path, false, nil
		}
		if first, _, _ := bytes.Cut(cur, []byte("\n")); !bytes.Equal(first, header()) && !force {
			return path, false, fmt.Errorf("%s exists and is not a copy of lumina.lua (its first line is not %q): %w; install with --force to replace it", path, header(), ErrNotOurs)
		}
	} // another error (the folder is missing or not a folder): MkdirAll below says what
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return path, false, fmt.Errorf("creating the plugins folder: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+FileName+".tmp-")
	if err != nil {
		return path, false, fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(Script); err != nil {
		tmp.Close()
		return path, false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return path, false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return path, false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return path, false, fmt.Errorf("writing %s: %w", path, err)
	}
	return path, true, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	}
	return "special file"
}
