// Package tfevents writes and reads TensorBoard event files in pure Go, so that
// `tensorboard --logdir <run folder>` shows a run's scalar curves without any user code.
//
// An event file is a sequence of TFRecords. Each record is the 8-byte little-endian length
// of its data, the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the
// data. The data is a serialized tensorflow.Event protocol buffer, encoded here by hand
// (see proto.go) with only the fields TensorBoard needs for scalars:
//
//	message Event {
//	  double wall_time = 1;
//	  int64 step = 2;
//	  oneof what { string file_version = 3; Summary summary = 5; }
//	}
//	message Summary { repeated Value value = 1; }
//	message Summary.Value { string tag = 1; float simple_value = 2; }
//
// [Create] opens a new file and writes the "brain.Event:2" file_version event that
// TensorBoard expects first; [Writer.AddScalars] appends one Event per step. Records are
// buffered: [Writer.Flush] hands them to the operating system (TensorBoard, which tails the
// file, sees them from then on) and [Writer.Sync] also fsyncs them.
//
// [ReadScalars] reads such a file back, checking both checksums of every record. It is
// used by trainyard itself and by the tests, which also parse the files with an
// independent Python reader (testdata/read_tfevents.py).
//
// Values are stored as float32 (simple_value), as TensorBoard does; NaN and ±Inf
// round-trip. Values that do not fit in a float32 become ±Inf.
//
// Checking a file with a real TensorBoard (not installed where these tests run): with
// tensorboard installed, this prints every scalar tag of a run folder (or of one events
// file) with its (step, value) points:
//
//	python3 -c "import sys; from tensorboard.backend.event_processing.event_accumulator import EventAccumulator; a = EventAccumulator(sys.argv[1], size_guidance={'scalars': 0}); a.Reload(); [print(t, [(e.step, e.value) for e in a.Scalars(t)]) for t in a.Tags()['scalars']]" <run folder>
//
// (size_guidance={'scalars': 0} keeps every point; by default EventAccumulator samples 10000
// per tag.)
package tfevents
