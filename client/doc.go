// Package client is the Go client of a trainyard server's native API (/api/v1/), the
// API that `trainyard server` serves beside Ray's Jobs API. The trainyard command line
// reaches a server only through it.
//
// A Client sends the server's token as "Authorization: Bearer <token>" with every
// request. On the server's own machine the token is in the server's token file, which
// ResolveToken finds by itself; elsewhere, set TRAINYARD_TOKEN. ResolveAddress picks
// the server: a given address, else $TRAINYARD_ADDRESS, else DefaultAddress. Connect
// does both, as the CLI does, and sends the token it found by itself only to the
// servers its token file belongs to (the addresses they recorded beside it).
//
//	c := client.New(client.ResolveAddress(""), token)
//	job, err := c.Submit(ctx, client.SubmitRequest{Job: trainJob})
//	if err != nil { ... }                  // an *APIError when the server refused it
//	err = c.Follow(ctx, job.ID, os.Stdout, client.LogOptions{})
//
// The wire types are the server's own (internal/server/apitypes.go), named here by
// aliases so that programs outside this module can use them.
package client
