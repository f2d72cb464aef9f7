package testkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDNATMatchesLoopbackOnly(t *testing.T) {
	cases := []struct {
		name string
		rule string
		want bool
	}{
		{"portmap", `-A CNI-DN-bdaaf04c2c43f863325b4 -d 127.0.0.1/32 -p tcp -m tcp --dport 61739 -j DNAT --to-destination 10.213.0.124:8080`, true},
		{"docker", `-A DOCKER -d 127.0.0.1/32 ! -i docker0 -p tcp -m tcp --dport 32773 -j DNAT --to-destination 172.17.0.2:8080`, true},
		{"any destination", `-A CNI-DN-bdaaf04c2c43f863325b4 -p tcp -m tcp --dport 61739 -j DNAT --to-destination 10.213.0.124:8080`, false},
		{"negated loopback", `-A DOCKER ! -d 127.0.0.1/32 -p tcp -m tcp --dport 32773 -j DNAT --to-destination 172.17.0.2:8080`, false},
		{"a subnet", `-A DOCKER -d 127.0.0.0/8 -p tcp -m tcp --dport 32773 -j DNAT --to-destination 172.17.0.2:8080`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DNATMatchesLoopbackOnly(tc.rule))
		})
	}
}

func TestHostPathMounts(t *testing.T) {
	const id = "707569edd75b"
	mountinfo := `101 72 0:39 / / rw,relatime master:3 - overlay overlay rw,lowerdir=/x
104 103 0:44 / /dev/pts rw,nosuid,noexec,relatime - devpts devpts rw,gid=5
118 101 254:0 /var/lib/docker/containers/707569edd75b/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/vda rw
119 101 254:0 /var/lib/docker/containers/0000other/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw
120 101 254:0 /srv/data /data rw,relatime - ext4 /dev/vda rw
121 101 0:5 / /run/docker.sock rw - devtmpfs udev rw
122 101 0:50 / /scratch rw,nosuid - tmpfs tmpfs rw,size=16384k
123 117 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw
124 101 0:5 /null /etc/passwd rw,nosuid - devtmpfs udev rw
125 101 0:5 /null /dev/null rw,nosuid - devtmpfs udev rw
126 101 0:5 /urandom /dev/urandom rw,nosuid - devtmpfs udev rw
127 101 0:5 /sda /dev/sda rw,nosuid - devtmpfs udev rw
128 101 0:5 /zero /dev/random rw,nosuid - devtmpfs udev rw`
	got := HostPathMounts(ParseMountinfo(t, mountinfo), id)
	var points []string
	for _, m := range got {
		points = append(points, m.Point)
	}
	assert.Equal(t, []string{"/etc/hosts", "/data", "/run/docker.sock", "/etc/passwd", "/dev/sda", "/dev/random"}, points,
		"another container's file, a host directory, a disk and devices bound elsewhere are host paths; this container's resolv.conf, a masked /proc path and the default device nodes at their own place are not")
}
