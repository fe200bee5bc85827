package statuspage

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// browser is headless Chromium driven over the DevTools protocol on a pair
// of pipes (--remote-debugging-pipe): Chromium reads commands from its fd 3
// and writes answers and events to its fd 4, each message one JSON object
// ended by a NUL byte. Pipes need neither a port nor a WebSocket client,
// and nothing else on the machine can talk to the browser.
type browser struct {
	cmd  *exec.Cmd
	in   *os.File // our end of Chromium's fd 3
	out  *os.File // our end of Chromium's fd 4
	read *bufio.Reader
	next int
	// events keeps the events read while waiting for an answer, for a
	// later wait.
	events []cdpMessage
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    any             `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// chromiumFlags are the flags of every run: headless, no sandbox (the
// benchmark runs as root), and none of the background work (updates,
// sync, network probes) that would share the CPU with what is measured.
func chromiumFlags(profileDir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--window-size=1280,860", "--user-data-dir=" + profileDir, "--remote-debugging-pipe"}
}

// startBrowser starts bin with a fresh profile in profileDir.
func startBrowser(bin, profileDir string) (*browser, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(err, cmdR.Close(), cmdW.Close())
	}
	cmd := exec.Command(bin, chromiumFlags(profileDir)...)
	cmd.ExtraFiles = []*os.File{cmdR, evW} // fds 3 and 4
	err = cmd.Start()
	// The child holds its own copies now.
	err = errors.Join(err, cmdR.Close(), evW.Close())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("starting %s: %w", bin, err), cmdW.Close(), evR.Close())
	}
	return &browser{cmd: cmd, in: cmdW, out: evR, read: bufio.NewReaderSize(evR, 1<<20)}, nil
}

// close ends the browser: Browser.close, then a kill if it does not exit.
func (b *browser) close() {
	_ = b.send(&cdpMessage{Method: "Browser.close"})
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
	b.in.Close()
	b.out.Close()
}

func (b *browser) send(m *cdpMessage) error {
	b.next++
	m.ID = b.next
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = b.in.Write(append(data, 0))
	return err
}

// receive reads one message, waiting until the context's deadline.
func (b *browser) receive(ctx context.Context) (cdpMessage, error) {
	var m cdpMessage
	if d, ok := ctx.Deadline(); ok {
		if err := b.out.SetReadDeadline(d); err != nil {
			return m, err
		}
	}
	data, err := b.read.ReadBytes(0)
	if err != nil {
		return m, fmt.Errorf("reading from chromium: %w", err)
	}
	err = json.Unmarshal(data[:len(data)-1], &m)
	return m, err
}

// call sends method with params in session ("" for the browser) and
// decodes its result into result (nil: ignore it).
func (b *browser) call(ctx context.Context, session, method string, params, result any) error {
	m := &cdpMessage{SessionID: session, Method: method, Params: params}
	if err := b.send(m); err != nil {
		return fmt.Errorf("sending %s: %w", method, err)
	}
	id := m.ID
	for {
		r, err := b.receive(ctx)
		if err != nil {
			return fmt.Errorf("waiting for the answer to %s: %w", method, err)
		}
		if r.ID != id {
			if r.Method != "" {
				b.events = append(b.events, r)
			}
			continue
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(r.Result, result)
	}
}

// wait returns once the event method arrived in session.
func (b *browser) wait(ctx context.Context, session, method string) error {
	for i, e := range b.events {
		if e.SessionID == session && e.Method == method {
			b.events = append(b.events[:i], b.events[i+1:]...)
			return nil
		}
	}
	for {
		e, err := b.receive(ctx)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", method, err)
		}
		if e.SessionID == session && e.Method == method {
			return nil
		}
		if e.Method != "" {
			b.events = append(b.events, e)
		}
	}
}

// PageLoad is what loading one page cost the browser.
type PageLoad struct {
	// From the Navigation Timing of the page, in ms from the navigation's
	// start: the first byte of the answer, its last byte, the DOM parsed
	// (DOMContentLoaded handled) and the load event handled.
	FirstByte, LastByte, DOMContentLoaded, Load float64
	// Bytes is the answer's body as received (decodedBodySize).
	Bytes int
	// From Performance.getMetrics: the time spent laying out and in style
	// recalculation, and the DOM nodes.
	Layout, RecalcStyle time.Duration
	Nodes               int
}

// timingScript reads the navigation timing of the loaded page after two
// animation frames, so that the layout and style work of its first frame
// is in the metrics read next.
const timingScript = `new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))).then(() => JSON.stringify((() => {
  const n = performance.getEntriesByType('navigation')[0];
  return {FirstByte: n.responseStart, LastByte: n.responseEnd, DOMContentLoaded: n.domContentLoadedEventEnd,
    Load: n.loadEventEnd, Bytes: n.decodedBodySize};
})()))`

// load opens url in a new tab, waits for its load event, reads what it
// cost and closes the tab: each load starts without the previous one's
// DOM or metrics.
func (b *browser) load(ctx context.Context, url string) (PageLoad, error) {
	var pl PageLoad
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return pl, err
	}
	defer func() {
		_ = b.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": target.TargetID}, nil)
	}()
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		return pl, err
	}
	s := attached.SessionID
	for _, m := range []string{"Page.enable", "Performance.enable"} {
		if err := b.call(ctx, s, m, nil, nil); err != nil {
			return pl, err
		}
	}
	// A load event of about:blank is no answer for url.
	b.events = b.events[:0]
	if err := b.call(ctx, s, "Page.navigate", map[string]any{"url": url}, nil); err != nil {
		return pl, err
	}
	if err := b.wait(ctx, s, "Page.loadEventFired"); err != nil {
		return pl, err
	}
	var eval struct {
		Result struct {
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails any `json:"exceptionDetails"`
	}
	if err := b.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": timingScript, "returnByValue": true, "awaitPromise": true}, &eval); err != nil {
		return pl, err
	}
	if eval.ExceptionDetails != nil || eval.Result.Value == "" {
		return pl, fmt.Errorf("reading the page's timing: %v", eval.ExceptionDetails)
	}
	if err := json.Unmarshal([]byte(eval.Result.Value), &pl); err != nil {
		return pl, err
	}
	var metrics struct {
		Metrics []struct {
			Name  string  `json:"name"`
			Value float64 `json:"value"`
		} `json:"metrics"`
	}
	if err := b.call(ctx, s, "Performance.getMetrics", nil, &metrics); err != nil {
		return pl, err
	}
	for _, m := range metrics.Metrics {
		switch m.Name {
		case "LayoutDuration":
			pl.Layout = time.Duration(m.Value * float64(time.Second))
		case "RecalcStyleDuration":
			pl.RecalcStyle = time.Duration(m.Value * float64(time.Second))
		case "Nodes":
			pl.Nodes = int(m.Value)
		}
	}
	return pl, nil
}
