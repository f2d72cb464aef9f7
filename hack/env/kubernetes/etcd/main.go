//go:build ignore

// Command etcd is the test cluster's etcd: a single member on loopback,
// around go.etcd.io/etcd/server/v3/embed, built by hack/env/kubernetes.sh in
// a throw-away module (the build tag keeps it out of sandboxer's own module;
// the script removes that line when it copies the file there).
package main

import (
	"flag"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dir := flag.String("data-dir", "", "data directory")
	client := flag.String("client-url", "http://127.0.0.1:12379", "the URL clients connect to (loopback only)")
	peer := flag.String("peer-url", "http://127.0.0.1:12380", "the peer URL (single member: loopback only)")
	flag.Parse()
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatalf("etcd: -client-url: %v", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatalf("etcd: -peer-url: %v", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "sandboxer"
	cfg.Dir = *dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcd: start: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		log.Printf("etcd: ready on %s", cu)
	case <-time.After(60 * time.Second):
		e.Close()
		log.Fatal("etcd: not ready after 60s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		log.Printf("etcd: %v: stopping", s)
		e.Close()
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	}
}
