package mongotest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	mongo "go.mongodb.org/mongo-driver/v2/mongo"
)

// TestMongoFull: mongod's OutOfDiskSpace (14031) and the stand-in's
// "database or disk is full" are full; a dropped connection (what a
// WiredTiger panic, which ends mongod, leaves a client with) never is,
// whatever its message says, nor is any other error.
func TestMongoFull(t *testing.T) {
	tests := []struct {
		name string
		err  error
		full bool
	}{
		{"OutOfDiskSpace", mongo.CommandError{Code: outOfDiskSpace, Name: "OutOfDiskSpace", Message: "Insufficient disk space"}, true},
		{"WriteOutOfDiskSpace", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: outOfDiskSpace, Message: "Insufficient disk space"}}}, true},
		{"FerretDBFull", errors.New("(InternalError) database or disk is full (13)"), true},
		{"ConnectionDropped", mongo.CommandError{Labels: []string{"NetworkError"}, Message: "connection closed: WiredTiger panic: disk full"}, false},
		{"Other", mongo.CommandError{Code: 11000, Name: "DuplicateKey", Message: "E11000 duplicate key"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.full, full(tt.err))
		})
	}
}
