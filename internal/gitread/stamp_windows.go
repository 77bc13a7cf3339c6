package gitread

import (
	"errors"
	"syscall"
)

// finalMissing reports whether a not-exist error says only the last part
// of the path is missing: Windows tells ERROR_FILE_NOT_FOUND (the
// directory exists) from ERROR_PATH_NOT_FOUND (a part of the way does not
// exist, or is not a directory).
func finalMissing(err error) bool { return errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) }
