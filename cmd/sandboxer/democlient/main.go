// Command democlient is the client half of the quick-start demo: run under
// `sandboxer run --services postgres,redis,mongo -- democlient`, it reads
// the sandboxes' env, prints it with the passwords masked, and proves each
// service with its real Go client (pgx, go-redis, mongo-driver v2): one
// write and one read each. It exits 1 if any service fails.
//
// Usage:
//
//	democlient [-env-prefix ROBOCO_TEST]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/roboco/sandboxer/engines"
	"github.com/roboco/sandboxer/provision"
)

func main() {
	prefix := flag.String("env-prefix", provision.DefaultEnvPrefix, "prefix of the sandbox env")
	flag.Parse()

	// The env as sandboxer emitted it, with each variable's secret flag
	// from its engine, so that provision's masking applies.
	var sb provision.Sandbox
	var services []string
	for _, e := range engines.Default.All() {
		found := false
		for _, v := range e.Env(*prefix, engines.Endpoint{}, engines.Credentials{Password: "x"}) {
			if val, ok := os.LookupEnv(v.Name); ok {
				v.Value = val
				sb.Env = append(sb.Env, v)
				found = true
			}
		}
		if found {
			services = append(services, e.Spec().Name)
		}
	}
	if len(services) == 0 {
		fmt.Fprintf(os.Stderr, "democlient: no %s_* variables: run me under `sandboxer run`\n", *prefix)
		os.Exit(2)
	}
	fmt.Println("env (passwords masked):")
	for _, v := range sb.Masked().Env {
		fmt.Printf("  %s=%s\n", v.Name, v.Value)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failed := false
	for _, s := range services {
		start := time.Now()
		var detail string
		var err error
		switch s {
		case "postgres":
			detail, err = checkPostgres(ctx, sb.Map()[*prefix+"_DB_URL"])
		case "redis":
			detail, err = checkRedis(ctx, sb.Map()[*prefix+"_REDIS_URL"])
		case "mongo":
			m := sb.Map()
			detail, err = checkMongo(ctx, m[*prefix+"_MONGO_URL"], m[*prefix+"_MONGO_DB"])
		default:
			detail = "no client in this demo"
		}
		if err != nil {
			failed = true
			fmt.Printf("%-8s FAILED: %v\n", s, err)
			continue
		}
		fmt.Printf("%-8s ok in %s: %s\n", s, time.Since(start).Round(time.Millisecond), detail)
	}
	if failed {
		os.Exit(1)
	}
}

func checkPostgres(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "create table demo (v text); insert into demo values ('hello')"); err != nil {
		return "", err
	}
	var v, version string
	if err := conn.QueryRow(ctx, "select v, current_setting('server_version') from demo").Scan(&v, &version); err != nil {
		return "", err
	}
	return fmt.Sprintf("pgx wrote and read %q (server %s)", v, version), nil
}

func checkRedis(ctx context.Context, url string) (string, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return "", err
	}
	c := redis.NewClient(o)
	defer c.Close()
	if err := c.Set(ctx, "demo", "hello", 0).Err(); err != nil {
		return "", err
	}
	v, err := c.Get(ctx, "demo").Result()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("go-redis wrote and read %q", v), nil
}

func checkMongo(ctx context.Context, url, db string) (string, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(url).SetServerSelectionTimeout(20 * time.Second))
	if err != nil {
		return "", err
	}
	defer c.Disconnect(ctx)
	coll := c.Database(db).Collection("demo")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "v", Value: "hello"}}); err != nil {
		return "", err
	}
	var doc struct {
		V string `bson:"v"`
	}
	if err := coll.FindOne(ctx, bson.D{}).Decode(&doc); err != nil {
		return "", err
	}
	return fmt.Sprintf("mongo-driver wrote and read %q", doc.V), nil
}
