// Package statuspage is the benchmark of the admin status page: the bridge
// binary at N services and C clients, its pages loaded in headless
// Chromium over the DevTools protocol, timed and sized per path (Run).
package statuspage
