package deploycheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Image is what the manifests rely on of the image the repository's
// Dockerfile builds: the program it runs and its default arguments.
type Image struct {
	Entrypoint, Cmd []string
}

// ReadImage reads the exec-form ENTRYPOINT and CMD of the final stage of
// the Dockerfile at root. Continuation lines are not followed: both are
// one line each in the Dockerfile.
func ReadImage(root string) (Image, error) {
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return Image{}, err
	}
	var img Image
	for l := range strings.Lines(string(data)) {
		word, rest, _ := strings.Cut(strings.TrimSpace(l), " ")
		var into *[]string
		switch strings.ToUpper(word) {
		case "FROM":
			img = Image{} // a later stage starts afresh
		case "ENTRYPOINT":
			into = &img.Entrypoint
		case "CMD":
			into = &img.Cmd
		}
		if into != nil {
			if err := json.Unmarshal([]byte(rest), into); err != nil {
				return Image{}, fmt.Errorf("Dockerfile: %s is not in exec form: %w", word, err)
			}
		}
	}
	return img, nil
}

// ConfigFlag returns the file an argument list names with --config.
func ConfigFlag(args []string) (string, error) {
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) {
		return "", fmt.Errorf("%q names no --config FILE", args)
	}
	return args[i+1], nil
}
