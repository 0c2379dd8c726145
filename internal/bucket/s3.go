package bucket

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// PathStyleEnv forces the addressing of the bucket: "true" puts it in the path
// (https://host/bucket/key), "false" in the host name (https://bucket.host/key). Left
// unset, the path is used where the endpoint needs it: an IP address, localhost, or a
// host name without a dot or ending in .svc or .cluster.local (a Kubernetes Service).
const PathStyleEnv = "TRAINYARD_S3_PATH_STYLE"

// maxAttempts is how often a request is tried, with the SDK's backoff between tries, when
// the store answers that it is busy (503 SlowDown) or the connection fails.
const maxAttempts = 10

// Store is the objects under one URI's prefix, in one bucket. Its methods are safe for
// concurrent use; keys are relative to the prefix.
type Store struct {
	uri    URI
	client *s3.Client
	// Endpoint is the store's endpoint as configured ("" for AWS's own), for messages.
	Endpoint string
}

// ErrExists is returned (wrapped) by PutIfAbsent when the object is there already.
var ErrExists = errors.New("object exists")

// ErrNotFound is returned (wrapped) by Get and GetFile when there is no such object.
var ErrNotFound = errors.New("no such object")

// Open returns the store of u, with credentials, region and endpoint from the AWS SDK's
// default configuration (no request is made: Check makes one).
func Open(ctx context.Context, u URI) (*Store, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRetryer(func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts = maxAttempts })
	}))
	if err != nil {
		return nil, fmt.Errorf("%s: the AWS configuration: %w", u, err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1" // what S3-compatible stores take, and where AWS redirects from
	}
	endpoint := firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	if endpoint == "" && cfg.BaseEndpoint != nil {
		endpoint = *cfg.BaseEndpoint
	}
	pathStyle, err := usePathStyle(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = pathStyle
		// S3-compatible stores differ in which of the newer checksums they take; the
		// manifest's CRC-32C checks every file end to end anyway.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{uri: u, client: client, Endpoint: endpoint}, nil
}

// usePathStyle says whether the bucket goes in the path for endpoint (see PathStyleEnv).
func usePathStyle(endpoint string) (bool, error) {
	switch v := strings.ToLower(os.Getenv(PathStyleEnv)); v {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	case "":
	default:
		return false, fmt.Errorf("%s=%q: give true or false", PathStyleEnv, v)
	}
	if endpoint == "" {
		return false, nil
	}
	e, err := url.Parse(endpoint)
	if err != nil || e.Host == "" {
		return false, fmt.Errorf("the S3 endpoint %q is not a URL such as http://10.0.0.5:9000", endpoint)
	}
	host := e.Hostname()
	return net.ParseIP(host) != nil || host == "localhost" || !strings.Contains(host, ".") ||
		strings.HasSuffix(host, ".svc") || strings.HasSuffix(host, ".cluster.local"), nil
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// URI is the store's URI.
func (s *Store) URI() URI { return s.uri }

// Sub returns the store of the objects under name in s's prefix.
func (s *Store) Sub(name string) *Store {
	c := *s
	c.uri = s.uri.Join(name)
	return &c
}

// Check makes one request, so that a missing bucket, missing or wrong credentials, or an
// endpoint that does not answer are said before anything else is done.
func (s *Store) Check(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.uri.Bucket})
	if err == nil {
		return nil
	}
	where := s.uri.String()
	if s.Endpoint != "" {
		where += " at " + s.Endpoint
	}
	switch code(err) {
	case "NotFound", "NoSuchBucket":
		return fmt.Errorf("%s: the bucket %s does not exist (create it first)", where, s.uri.Bucket)
	case "Forbidden", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Errorf("%s: access denied with the credentials found (%s): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "+
			"AWS_PROFILE, or the role of the pod or instance: %w", where, credentialSource(), err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// credentialSource names where the SDK's chain would find credentials first, for messages.
func credentialSource() string {
	switch {
	case os.Getenv("AWS_ACCESS_KEY_ID") != "":
		return "AWS_ACCESS_KEY_ID from the environment"
	case os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE") != "":
		return "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)"
	case os.Getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") != "" || os.Getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") != "":
		return "container credentials (EKS Pod Identity or ECS)"
	case os.Getenv("AWS_PROFILE") != "":
		return "the profile " + os.Getenv("AWS_PROFILE")
	}
	return "shared profiles, then the instance metadata"
}

// code is the S3 error code of err ("" if it has none).
func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// PutIfAbsent writes the object key only if there is none yet (a conditional write,
// If-None-Match: *), and returns ErrExists otherwise: two writers never both succeed.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.uri.Bucket, Key: aws.String(s.uri.Key(key)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*")})
	switch {
	case err == nil:
		return nil
	case code(err) == "PreconditionFailed" || code(err) == "ConditionalRequestConflict":
		return fmt.Errorf("put %s: %w", s.uri.Join(key), ErrExists)
	}
	return fmt.Errorf("put %s: %w", s.uri.Join(key), err)
}

// Get reads the object key whole; it refuses one over limit bytes.
func (s *Store) Get(ctx context.Context, key string, limit int64) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.uri.Bucket, Key: aws.String(s.uri.Key(key))})
	if err != nil {
		return nil, s.readErr(key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", s.uri.Join(key), err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("get %s: over %d bytes", s.uri.Join(key), limit)
	}
	return data, nil
}

// readErr wraps a read's error, as ErrNotFound where the object is missing.
func (s *Store) readErr(key string, err error) error {
	switch code(err) {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("get %s: %w", s.uri.Join(key), ErrNotFound)
	}
	return fmt.Errorf("get %s: %w", s.uri.Join(key), err)
}

// Object is one object of a listing.
type Object struct {
	Key  string // relative to the store's prefix
	Size int64
}

// List returns the objects whose keys start with prefix (relative to the store's), in
// key order.
func (s *Store) List(ctx context.Context, prefix string) ([]Object, error) {
	full := s.uri.Key(prefix)
	if s.uri.Prefix != "" && prefix == "" {
		full = s.uri.Prefix + "/"
	}
	var objs []Object
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.uri.Bucket, Prefix: &full})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.uri.Join(prefix), err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if s.uri.Prefix != "" {
				key = strings.TrimPrefix(key, s.uri.Prefix+"/")
			}
			objs = append(objs, Object{Key: key, Size: aws.ToInt64(o.Size)})
		}
	}
	return objs, nil
}

// Delete removes the objects keys; a missing one is no error.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	return each(ctx, len(keys), parallel, func(ctx context.Context, i int) error {
		_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.uri.Bucket, Key: aws.String(s.uri.Key(keys[i]))})
		if err != nil && code(err) != "NoSuchKey" {
			return fmt.Errorf("delete %s: %w", s.uri.Join(keys[i]), err)
		}
		return nil
	})
}

// PathStyle says whether the bucket goes in the path of requests (see PathStyleEnv).
func (s *Store) PathStyle() bool { return s.client.Options().UsePathStyle }
