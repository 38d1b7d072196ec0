// policy.go owns --device-holders: what a hold does about holders found
// after teardown (warn, wait or fail), as a flag value, and whether it
// hands its token on while one is left.
package device

import "fmt"

// Policy is what a hold does about device holders found after teardown.
// It implements pflag.Value, so it can be bound with Flags().Var.
type Policy string

const (
	// PolicyWarn reports the holders and releases (the default).
	PolicyWarn Policy = "warn"
	// PolicyWait waits up to a bound (--device-wait) for the holders to
	// go; one still there is reported, and the token kept until it goes.
	PolicyWait Policy = "wait"
	// PolicyFail looks once: a holder makes the hold exit 73
	// (hold.ExitDeviceHolders), and the token is kept until it goes.
	PolicyFail Policy = "fail"
)

// KeepsToken reports whether a hold under p keeps its token while a
// holder outside its lineage still holds the device: wait and fail refuse
// to hand a held device on; warn hands it on and reports.
func (p Policy) KeepsToken() bool { return p == PolicyWait || p == PolicyFail }

// ParsePolicy parses a --device-holders value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyWarn, PolicyWait, PolicyFail:
		return p, nil
	case "":
		return PolicyWarn, nil
	}
	return "", fmt.Errorf("--device-holders %q is not one of warn, wait, fail", s)
}

func (p *Policy) String() string {
	if p == nil || *p == "" {
		return string(PolicyWarn)
	}
	return string(*p)
}

// Set parses s into p (pflag.Value).
func (p *Policy) Set(s string) error {
	v, err := ParsePolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Type names the flag's value type (pflag.Value).
func (p *Policy) Type() string { return "warn|wait|fail" }
