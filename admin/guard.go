package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/xdsbridge/xdsbridge/manager"
)

// confirmHandler serves POST /guard/confirm?source=NAME: the operator says
// the removals the source's guard holds are real, and they apply at once.
func confirmHandler(confirm func(ctx context.Context, source string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		source := r.URL.Query().Get("source")
		if source == "" {
			http.Error(w, "the source parameter is required", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		switch err := confirm(ctx, source); {
		case errors.Is(err, manager.ErrNoSource):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil:
			// Nothing held, or the manager is busy: the request was right,
			// the state is not.
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "applied the held removals of %s\n", source) //nolint:gosec // a configured source's name (confirm found it), in a text/plain answer
	}
}
