package bucket

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// PartSize is the size of the parts of a large object, written or read at once; files of
// more than two parts are written with a multipart upload and read with ranged reads.
// parallel parts are in flight at a time per file. Nothing is buffered: each part is read
// from or written to the file at its offset, so a transfer's memory does not grow with the
// file.
const (
	PartSize = 16 << 20
	parallel = 8
)

// each runs f(ctx, i) for i in [0, n), at most width at a time, and returns the first error;
// the others are cancelled then.
func each(ctx context.Context, n, width int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(width)
	for i := range n {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// unsignedPayload signs a file's upload without a SHA-256 of its content (as the SDK does
// over HTTPS anyway): hashing it would read every byte a second time, on the cores that
// train. The manifest's CRC-32C of every file, written last, is what a resume checks.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// PutFile writes the file at path as the object key: in one request, or in parts of
// PartSize, parallel at a time, when it is larger than two parts.
func (s *Store) PutFile(ctx context.Context, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	size := info.Size()
	k := aws.String(s.uri.Key(key))
	if size <= 2*PartSize {
		_, err = s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.uri.Bucket, Key: k,
			Body: io.NewSectionReader(f, 0, size), ContentLength: aws.Int64(size)}, unsignedPayload)
		if err != nil {
			return fmt.Errorf("put %s: %w", s.uri.Join(key), err)
		}
		return nil
	}
	return s.putParts(ctx, key, f, size)
}

// putParts is PutFile's multipart upload; one that fails is aborted.
func (s *Store) putParts(ctx context.Context, key string, f *os.File, size int64) error {
	k := aws.String(s.uri.Key(key))
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.uri.Bucket, Key: k})
	if err != nil {
		return fmt.Errorf("put %s: start the upload: %w", s.uri.Join(key), err)
	}
	n := int((size + PartSize - 1) / PartSize)
	parts := make([]types.CompletedPart, n)
	err = each(ctx, n, parallel, func(ctx context.Context, i int) error {
		off := int64(i) * PartSize
		length := min(PartSize, size-off)
		out, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.uri.Bucket, Key: k, UploadId: up.UploadId,
			PartNumber: aws.Int32(int32(i + 1)), Body: io.NewSectionReader(f, off, length), ContentLength: aws.Int64(length)},
			unsignedPayload)
		if err != nil {
			return fmt.Errorf("part %d of %d: %w", i+1, n, err)
		}
		parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))}
		return nil
	})
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.uri.Bucket, Key: k,
			UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	}
	if err != nil {
		// Abort with a context of its own: ctx may be what ended the upload.
		abort, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30e9)
		defer cancel()
		_, _ = s.client.AbortMultipartUpload(abort, &s3.AbortMultipartUploadInput{Bucket: &s.uri.Bucket, Key: k, UploadId: up.UploadId})
		return fmt.Errorf("put %s: %w", s.uri.Join(key), err)
	}
	return nil
}

// GetFile writes the object key, of size bytes, into the file at path (created, 0600),
// in ranges of PartSize read parallel at a time when it is larger than two parts. It does
// not sync the file: a caller that needs it durable syncs it.
func (s *Store) GetFile(ctx context.Context, key, path string, size int64) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	n := max(1, int((size+PartSize-1)/PartSize))
	if size <= 2*PartSize {
		n = 1
	}
	err = each(ctx, n, parallel, func(ctx context.Context, i int) error {
		in := &s3.GetObjectInput{Bucket: &s.uri.Bucket, Key: aws.String(s.uri.Key(key))}
		off, length := int64(0), size
		if n > 1 {
			off = int64(i) * PartSize
			length = min(PartSize, size-off)
			in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", off, off+length-1))
		}
		out, err := s.client.GetObject(ctx, in)
		if err != nil {
			return s.readErr(key, err)
		}
		defer out.Body.Close()
		w := io.NewOffsetWriter(f, off)
		got, err := io.Copy(w, io.LimitReader(out.Body, length+1))
		if err == nil && got != length {
			err = fmt.Errorf("got %d bytes at %d, want %d (the object changed?)", got, off, length)
		}
		if err != nil {
			return fmt.Errorf("get %s: %w", s.uri.Join(key), err)
		}
		return nil
	})
	return err
}
