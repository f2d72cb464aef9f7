package podman

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frame is one frame of the multiplexed exec stream.
func frame(stream byte, payload string) []byte {
	hdr := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(hdr[4:], uint32(len(payload)))
	return append(hdr, payload...)
}

func TestDemux(t *testing.T) {
	cases := []struct {
		name       string
		stream     [][]byte
		wantStdout string
		wantStderr string
		wantErr    string
	}{
		{name: "Empty"},
		{
			name:       "Interleaved",
			stream:     [][]byte{frame(1, "o1"), frame(2, "e1"), frame(1, "o2"), frame(1, ""), frame(2, "e2")},
			wantStdout: "o1o2",
			wantStderr: "e1e2",
		},
		{
			name:       "ServiceError",
			stream:     [][]byte{frame(1, "partial"), frame(3, "exec died\n")},
			wantStdout: "partial",
			wantErr:    "exec stream: exec died",
		},
		{name: "UnknownChannel", stream: [][]byte{frame(7, "x")}, wantErr: "unknown channel 7"},
		{name: "TruncatedFrame", stream: [][]byte{frame(1, "abcdef")[:10]}, wantStdout: "ab", wantErr: "reading the exec stream"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := demux(bytes.NewReader(bytes.Join(tc.stream, nil)), &stdout, &stderr)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.wantStdout, stdout.String())
			assert.Equal(t, tc.wantStderr, stderr.String())
		})
	}
}

func TestStartFailureCode(t *testing.T) {
	cases := []struct {
		name   string
		sess   execSession
		err    error
		want   int
		wantOK bool
	}{
		{name: "RecordedNotFound", sess: execSession{ExitCode: 127}, err: errors.New("x"), want: 127, wantOK: true},
		{name: "RecordedNotExecutable", sess: execSession{ExitCode: 126}, err: errors.New("x"), want: 126, wantOK: true},
		{
			name:   "CauseNotFound",
			err:    &errorModel{ResponseCode: 500, Because: "executable file not found in $PATH"},
			want:   127,
			wantOK: true,
		},
		{
			name:   "CausePermission",
			err:    &errorModel{ResponseCode: 500, Because: "permission denied"},
			want:   126,
			wantOK: true,
		},
		{name: "OtherFailure", err: &errorModel{ResponseCode: 500, Because: "OCI runtime error"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := startFailureCode(tc.sess, tc.err)
			assert.Equal(t, tc.wantOK, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}
