// Package bucket keeps files in object storage: the storage-path URIs Trainyard takes
// (s3://bucket/prefix) and a client for S3 and S3-compatible stores (MinIO, Ceph, R2) that
// writes, reads, lists and deletes objects, a large file in parallel parts, and writes a
// commit point only when no one else wrote it first.
//
// The client is the AWS SDK for Go v2 (service/s3 and config): it is the library AWS keeps,
// and its config package is the AWS SDK's default credential chain that S3 users expect
// (the environment, shared profiles, web identity as IRSA gives it, EKS Pod Identity and
// ECS container credentials, the EC2 instance metadata), and the endpoint settings of every
// SDK (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL).
package bucket

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// URI is a storage path in object storage: s3://Bucket/Prefix.
type URI struct {
	Scheme string // "s3"
	Bucket string
	Prefix string // slash-separated, without a leading or trailing slash; "" for the bucket's root
}

// String gives the URI back as s3://bucket/prefix.
func (u URI) String() string {
	if u.Prefix == "" {
		return u.Scheme + "://" + u.Bucket
	}
	return u.Scheme + "://" + u.Bucket + "/" + u.Prefix
}

// Join returns the URI of elem under u's prefix.
func (u URI) Join(elem ...string) URI {
	u.Prefix = strings.TrimPrefix(path.Join(append([]string{u.Prefix}, elem...)...), "/")
	return u
}

// Key is the object key of name (slash-separated) under u's prefix.
func (u URI) Key(name string) string {
	if u.Prefix == "" {
		return name
	}
	return u.Prefix + "/" + name
}

var (
	uriRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://([^/]*)(/.*)?$`)
	// s3Bucket is S3's rule for bucket names (the general purpose buckets' one).
	s3Bucket = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
)

// ErrNotURI is returned (wrapped) by Parse for a string that is no URI at all.
var ErrNotURI = errors.New("not a URI")

// Parse reads a storage URI. Only s3:// is supported; gs:// and any other scheme are
// refused with what to do instead, so that no URI is ever taken as a folder.
func Parse(s string) (URI, error) {
	m := uriRE.FindStringSubmatch(s)
	if m == nil {
		return URI{}, fmt.Errorf("%q: %w (want s3://bucket/prefix)", s, ErrNotURI)
	}
	scheme := strings.ToLower(m[1])
	switch scheme {
	case "s3":
	case "gs":
		return URI{}, fmt.Errorf("%s: gs:// is not supported yet; use Cloud Storage's S3-compatible API instead: "+
			"s3://%s with AWS_ENDPOINT_URL=https://storage.googleapis.com and an HMAC key in AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "+
			"or a folder every worker shares", s, m[2]+m[3])
	case "file":
		return URI{}, fmt.Errorf("%s: give the folder as a path (%s), not a file:// URI", s, m[3])
	default:
		return URI{}, fmt.Errorf("%s: the scheme %s:// is not supported: give s3://bucket/prefix or a folder", s, m[1])
	}
	u := URI{Scheme: scheme, Bucket: m[2], Prefix: strings.Trim(m[3], "/")}
	if !s3Bucket.MatchString(u.Bucket) || strings.Contains(u.Bucket, "..") {
		return URI{}, fmt.Errorf("%s: %q is not a bucket name (3 to 63 lower-case letters, digits, dots and hyphens, "+
			"starting and ending with a letter or digit)", s, u.Bucket)
	}
	for _, seg := range strings.Split(u.Prefix, "/") {
		if u.Prefix != "" && (seg == "" || seg == "." || seg == "..") {
			return URI{}, fmt.Errorf("%s: the prefix %q has an empty, . or .. part", s, u.Prefix)
		}
	}
	return u, nil
}
