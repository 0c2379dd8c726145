package jobspec

import (
	"errors"
	"fmt"
	"regexp"
)

// MaxNameLength is the longest name a job may have: a TrainJob's workers' host names are
// built from it on Kubernetes, which allows 45 characters (api/v1alpha1's CEL rule).
const MaxNameLength = 45

// NameRule is the rule every name a user gives follows (--name, a job file's
// metadata.name, submit's --id), said as error messages say it. It is the rule of a
// TrainJob's name on Kubernetes, so a job named for one backend runs on every one.
const NameRule = "a name is 1 to 45 characters: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"

// NameRuleHelp says NameRule in help texts, wrapped.
const NameRuleHelp = `Names (--name, a job file's metadata.name, submit's --id) are 1 to 45 characters:
lower-case letters, digits and '-', starting with a letter and ending with a letter or
digit, as a TrainJob's name on Kubernetes.`

var namePattern = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// ErrName is what CheckName's errors wrap.
var ErrName = errors.New(NameRule)

// CheckName returns nil when name follows NameRule, else an error that states the rule;
// what names the value (such as "--name") begins the message.
func CheckName(what, name string) error {
	if len(name) <= MaxNameLength && namePattern.MatchString(name) {
		return nil
	}
	return fmt.Errorf("%s %q: %w", what, name, ErrName)
}

// ValidName reports whether name follows NameRule.
func ValidName(name string) bool { return CheckName("", name) == nil }
