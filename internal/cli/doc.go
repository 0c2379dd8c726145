// Package cli is the trainyard command line: one file per subcommand, registered in
// root.go. Commands parse flags and wire packages together; the work is done elsewhere.
package cli
