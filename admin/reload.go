package admin

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// reloadTimeout bounds one POST /-/reload: the reload waits for the one in
// progress, then loads the file and hands the new sources to the manager,
// which takes well under a second; a bridge that cannot do it in this long
// is stuck, and the caller learns so.
const reloadTimeout = 30 * time.Second

// reloadHandler serves POST /-/reload: the configuration file is read again
// and applied, as on SIGHUP. The answer is what the reload did, as JSON; a
// configuration that does not load or validate is answered 400 with the
// error, one the bridge could not apply 500.
func reloadHandler(reload func(ctx context.Context) (result any, invalid bool, err error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), reloadTimeout)
		defer cancel()
		result, invalid, err := reload(ctx)
		switch {
		case err != nil && invalid:
			http.Error(w, fmt.Sprintf("configuration reload rejected; the running configuration stays: %v", err), http.StatusBadRequest)
		case err != nil:
			http.Error(w, fmt.Sprintf("configuration reload failed; the running configuration stays: %v", err), http.StatusInternalServerError)
		default:
			WriteJSON(w, result)
		}
	}
}
