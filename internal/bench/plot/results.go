// results.go owns the part of the bench's JSON the figures read.
package main

// dist is a distribution of times (ms).
type dist struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

type results struct {
	Teardown []struct {
		Shape    string `json:"shape"`
		N        int    `json:"n"`
		Behavior string `json:"behavior"`
		Modes    []struct {
			Mode   string `json:"mode"`
			TimeMS dist   `json:"time_ms"`
		} `json:"modes"`
	} `json:"teardown"`
	Busy *struct {
		Rows []struct {
			Processes int             `json:"processes"`
			HoldMS    map[string]dist `json:"hold_ms"`
			CheckMS   map[string]dist `json:"check_ms"`
			Again     bool            `json:"again"` // the idle host measured again, last
		} `json:"rows"`
	} `json:"busy"`
	Handoff *struct {
		Modes []struct {
			Mode   string `json:"mode"`
			IdleMS dist   `json:"idle_ms"`
		} `json:"modes"`
	} `json:"handoff"`
	LongHandoff []struct {
		Mode      string `json:"mode"`
		Host      string `json:"host"` // idle or busy ("" before the busy rows: idle)
		Processes int    `json:"host_processes"`
		IdleMS    dist   `json:"idle_ms"`
	} `json:"long_handoff"`
}
