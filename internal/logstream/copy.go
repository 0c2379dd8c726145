package logstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Copy reads lines from r until EOF, writing each whole to file (when not nil) and,
// without its line ending, to the console (when not nil). A last line without a newline
// is written too. The first write error to file is returned after r is drained, so a
// full disk never blocks the worker.
func Copy(r io.Reader, src Source, file io.Writer, console *Console) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var fileErr error
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if file != nil && fileErr == nil {
				if _, werr := io.WriteString(file, line); werr != nil {
					fileErr = fmt.Errorf("write log of rank %d: %w", src.Rank, werr)
				}
			}
			if console != nil {
				console.Line(src, strings.TrimRight(line, "\r\n"))
			}
		}
		if errors.Is(err, io.EOF) {
			return fileErr
		}
		if err != nil {
			return errors.Join(fmt.Errorf("read output of rank %d: %w", src.Rank, err), fileErr)
		}
	}
}
