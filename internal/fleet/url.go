package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// PasswordEnv names the environment variable that carries the store's password when the URL
// has none (the chart fills it from fleet.redis.passwordSecretRef).
const PasswordEnv = "SWITCHYARD_FLEET_REDIS_PASSWORD"

// Endpoint is a parsed --fleet-redis URL. Its String never shows the password.
type Endpoint struct {
	Addr     string // host:port
	Username string // ACL user; empty for the default user
	Password string // never logged: see String
	DB       int
	TLS      bool // rediss://
}

// ParseURL parses redis://[user[:password]@]host[:port][/db] or rediss://... (TLS). A password
// in the URL wins over envPassword (the value of $SWITCHYARD_FLEET_REDIS_PASSWORD). The port
// defaults to 6379 and the database to 0. Query parameters are refused: none is supported, and a
// silently ignored one (a TLS setting, say) would be worse than an error.
func ParseURL(raw, envPassword string) (Endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		// url's errors quote the input, password and all.
		return Endpoint{}, errors.New("--fleet-redis is not a URL (redis://host:port/db or rediss://...)")
	}
	var e Endpoint
	switch u.Scheme {
	case "redis":
	case "rediss":
		e.TLS = true
	default:
		return Endpoint{}, fmt.Errorf("--fleet-redis: scheme %q: want redis:// or rediss://", u.Scheme)
	}
	if u.Host == "" || u.Hostname() == "" {
		return Endpoint{}, errors.New("--fleet-redis: no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Endpoint{}, errors.New("--fleet-redis: query parameters and fragments are not supported")
	}
	port := u.Port()
	if port == "" {
		port = "6379"
	} else if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return Endpoint{}, fmt.Errorf("--fleet-redis: bad port %q", port)
	}
	e.Addr = net.JoinHostPort(u.Hostname(), port)
	if u.User != nil {
		e.Username = u.User.Username()
		e.Password, _ = u.User.Password()
	}
	if e.Password == "" {
		e.Password = envPassword
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return Endpoint{}, fmt.Errorf("--fleet-redis: database %q is not a number", db)
		}
		e.DB = n
	}
	return e, nil
}

// String is the endpoint as a URL for logs and status, with the password replaced: it says
// whether one is set, never what it is.
func (e Endpoint) String() string {
	scheme := "redis"
	if e.TLS {
		scheme = "rediss"
	}
	u := url.URL{Scheme: scheme, Host: e.Addr, Path: "/" + strconv.Itoa(e.DB)}
	switch {
	case e.Password != "":
		u.User = url.UserPassword(e.Username, "REDACTED")
	case e.Username != "":
		u.User = url.User(e.Username)
	}
	return u.String()
}

// GoString keeps %#v from printing the password too.
func (e Endpoint) GoString() string { return "fleet.Endpoint(" + e.String() + ")" }
