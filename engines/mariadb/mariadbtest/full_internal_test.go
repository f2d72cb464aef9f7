package mariadbtest

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
)

// TestMariaDBFull: InnoDB's "table is full", the server's "disk full" and
// a storage engine's error 28 (ENOSPC) are full; a dropped connection
// (what a server that died leaves a client with) and every other error
// are not.
func TestMariaDBFull(t *testing.T) {
	tests := []struct {
		name string
		err  error
		full bool
	}{
		{"TableIsFull", &mysql.MySQLError{Number: 1114, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "The table 'sandboxer_fill' is full"}, true},
		{"Wrapped", fmt.Errorf("exec: %w", &mysql.MySQLError{Number: 1114, Message: "The table 'sandboxer_fill' is full"}), true},
		{"DiskFull", &mysql.MySQLError{Number: 1021, Message: "Disk full (./t_1/db.opt); waiting for someone to free some space..."}, true},
		{"ENOSPCFromTheEngine", &mysql.MySQLError{Number: 1030, Message: `Got error 28 "No space left on device" from storage engine InnoDB`}, true},
		{"OtherEngineError", &mysql.MySQLError{Number: 1030, Message: `Got error 168 "Unknown (generic) error from engine" from storage engine InnoDB`}, false},
		{"DuplicateKey", &mysql.MySQLError{Number: 1062, Message: "Duplicate entry '1' for key 'PRIMARY'"}, false},
		{"ConnectionDropped", fmt.Errorf("the table is full: %w", driver.ErrBadConn), false},
		{"InvalidConn", mysql.ErrInvalidConn, false},
		{"Other", errors.New("no space left on device"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.full, full(tt.err))
		})
	}
}
