// Package docs holds Tether's documentation (Markdown). It has no code: its test checks the
// README and the pages here (links and their anchors, tables, the Go snippets, the opening of
// the README) and that no internal reference reaches a reader.
package docs
