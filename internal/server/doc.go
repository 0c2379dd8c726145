// Package server is `trainyard server`'s HTTP layer: it turns requests into calls of a
// jobs.Service, the engine that runs jobs on this machine's GPUs. It speaks two APIs on
// one listener, behind auth.Middleware (a bearer token and a Host check; only /healthz
// is exempt):
//
//   - Ray's Jobs REST API, so that Ray's JobSubmissionClient, `ray job submit` and other
//     Ray job clients (KubeRay's dashboard client among them) work unchanged;
//   - a native API under /api/v1/, whose wire types (apitypes.go) a Go client reuses.
//
// # Ray's Jobs API
//
// The endpoints, request and response bodies and status codes follow Ray's OpenAPI
// specification (doc/source/cluster/running-applications/job-submission/openapi.yml,
// API version 4) and Ray's own server (python/ray/dashboard/modules/job/job_head.py,
// job_agent.py, common.py and pydantic_models.py):
//
//	GET    /api/version                        {"version": "4", "ray_version", "ray_commit", "session_name"}
//	POST   /api/jobs/  (and /api/jobs)          JobSubmitRequest -> {"job_id", "submission_id"}
//	GET    /api/jobs/  (and /api/jobs)          [JobDetails, ...] (a list, as since API version 2)
//	GET    /api/jobs/{id}                       JobDetails
//	POST   /api/jobs/{id}/stop                  {"stopped": bool}; false when the job had already ended
//	DELETE /api/jobs/{id}                       {"deleted": true}; a job not yet ended is a 500, as Ray answers
//	GET    /api/jobs/{id}/logs                  {"logs": "..."}: the driver's raw output, its last 16 MiB at most
//	GET    /api/jobs/{id}/logs/tail             a WebSocket of the driver's raw output as it grows; closed when the job has ended
//	GET    /api/packages/{protocol}/{name}      200 when the package was uploaded, 404 otherwise
//	PUT    /api/packages/{protocol}/{name}      stores a zip archive (protocol "gcs" only)
//
// A submitted job is one worker running one process, `/bin/sh -c <entrypoint>`, with
// entrypoint_num_gpus whole GPUs (a fraction is refused: GPUs are not shared; a Ray
// Train script's fit() in it leases its gang's GPUs from the scheduler, see jobs),
// entrypoint_num_cpus cores (when not given or 0, the default share of every job that
// names no CPU: jobs.DefaultCPU) and entrypoint_memory bytes. Of runtime_env, working_dir
// (a folder on this machine, or a gcs:// package uploaded before, unpacked into the job's
// own folder) and env_vars are supported; excludes and config are accepted and have no
// effect; every other key is refused with a 400 that names it. Like Ray, the server
// ignores keys whose value is null and refuses unknown keys (Ray builds its request
// dataclass from the body, which fails on an unknown key, and answers 400).
//
// The driver's raw output is what Ray's logs are: rank 0's log of each attempt, in order,
// the bytes as written, without the console log's "trainyard:" lines and rank prefixes,
// which the native API and the CLI keep.
//
// A submission_id is any string, as Ray takes (up to 16 KiB, the store's bound), but ".",
// ".." and any with "/", which no URL could name again (400); in a URL it is
// path-escaped, and Ray's endpoints unescape it. No path is built from it: the job's
// run folder and spec file are named jobs.FolderName(id), the ID itself when it is a valid
// run name, else its safe characters and a hash. The native API keeps its rule for IDs.
//
// Errors are written as Ray's dashboard writes them (aiohttp's Response(text=...)): the
// message as the whole body, text/plain; charset=utf-8, no JSON, and so are the token
// check's refusals on Ray's paths, with Ray's words ("Unauthorized: Missing
// authentication token", 401; "Forbidden: Invalid authentication token", 403). KubeRay's
// client decodes any body but a 404's as a job, so a JSON error would read as an empty
// job; text is an error it reports. Status codes are Ray's dashboard's: 400 for a bad
// request, 404 for an unknown job, 500 for a submission_id in use (Ray's job agent
// answers 400 and the dashboard head, which Ray's clients talk to, passes that on as a
// 500; the message is Ray's, "Job with submission_id ... already exists. Please use a
// different submission_id.", and KubeRay takes only a 500 with it for "already
// submitted") and 500 for the deletion of a job that has not ended ("... but it is in a
// non-terminal state ..."). Where Ray's body is a Python traceback, ours is the
// traceback's message alone.
//
// # The native API
//
//	POST   /api/v1/jobs                 {"id"?, "job": TrainJob, "priority"?} as JSON, or the TrainJob
//	                                    as YAML (Content-Type: application/yaml; ?id= and ?priority=)
//	GET    /api/v1/jobs?status=S&limit=N {"jobs": [Job, ...], "total": N}; a page of a long list with
//	                                    ?q=words&sort=newest|name|status&offset=N (total: all that match)
//	GET    /api/v1/jobs/{id}            JobDetail: the job, its spec, its run record, last result, checkpoints
//	POST   /api/v1/jobs/{id}/stop       Job
//	DELETE /api/v1/jobs/{id}            204
//	GET    /api/v1/jobs/{id}/logs?rank=R&tail=N   a rank's log of the last attempt, or the console log (its last 16 MiB;
//	                                             ?whole=1: all of it)
//	GET    /api/v1/jobs/{id}/logs/tail              a WebSocket of the console log as it grows, as Ray's tail
//	GET    /api/v1/jobs/{id}/results?after=N&max=M  the reported results in order (ResultList), thinned to M (5,000) keeping the last
//	GET    /api/v1/jobs/{id}/checkpoints            every checkpoint committed (Checkpoints): iteration, score, size, kept or deleted
//	GET    /api/v1/node                 GPUs, CPU and memory: total, allocated, free
//
// In the native API, {id} is a job's ID or its name: the job with that ID if there is
// one, else the job with that name (404 "no job with id or name ..." for neither; 409,
// listing their IDs, for a name that several jobs have, as jobs submitted before names
// were unique may). A job's name (metadata.name) is unique among the server's jobs until
// it is deleted: submitting another job of that name is a 409. Ray's endpoints take IDs
// only, as Ray's do, and Ray's submissions have no name.
//
// The native API refuses unknown fields. Its errors use the same table as Ray's
// endpoints (errors.go), with a column of its own: 409 for a duplicate ID or name, for
// stopping an ended job and for deleting a running one.
//
// # Operations
//
// GET /metrics answers in the Prometheus text format (no client library): jobs by
// status, GPUs allocated and in all, restarts of the gang, and the time jobs waited in
// the queue. GET /healthz answers "ok" without a token and says nothing else.
//
// Every JSON body is limited to 1 MiB (413 beyond); package uploads to the upload
// limits (100 MiB by default). Every body must keep a pace (BodyRate: 16 KiB/s on
// average after 30 seconds), or the server stops reading it (408). A job whose spec its
// supervisor could not read (over jobspec.MaxFileSize as YAML) is refused at submit
// (400). Stored packages and the working folders unpacked from them share an upload
// quota (Config.UploadQuota); an upload or a submission past it is refused (507) until
// jobs are deleted. Logs are sent from their files a chunk at a time, Cache-Control:
// no-store.
package server
