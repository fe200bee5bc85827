//go:build !linux

package files

import "os"

// flush makes the files durable one fsync each: other systems have no
// per-filesystem flush.
func flush(_ string, paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
