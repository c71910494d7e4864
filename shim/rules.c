/* shim/rules.c: libsdp.conf rules and the negative cache. */
#include "shim.h"

/* ---- rules: OFED libsdp.conf ----------------------------------------------
 *
 *   log [destination stderr | syslog | file <path>] [min-level <1-9>]
 *   use sdp|tcp|both server|listen|connect|client <program> <address>[/<bits>]:<port>[-<port>]
 *
 * <program> is a shell pattern matched against the program's name, <address>
 * an IPv4 address, a bracketed IPv6 address or '*', <port> a number or '*'.
 * The first matching rule wins; no match means both. A file that has no use
 * rule means sdp, as in OFED libsdp. A syntax error is reported once, with
 * file and line, and then no rule of the file applies.
 */

struct rule {
	int mode, role;
	char prog[64];
	int any_addr, family, bits;
	uint8_t addr[16];
	int port_lo, port_hi;
};

struct rule *rules;
int n_rules, rules_loaded;

static int parse_addr_port(char *s, struct rule *r)
{
	char *colon = strrchr(s, ':');
	if (!colon)
		return -1;
	*colon = 0;
	char *port = colon + 1;
	if (!strcmp(port, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
	} else {
		char *end;
		long lo = strtol(port, &end, 10), hi = lo;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (*end || lo < 0 || hi > 65535 || lo > hi || port == end)
			return -1;
		r->port_lo = (int)lo;
		r->port_hi = (int)hi;
	}
	if (!strcmp(s, "*")) {
		r->any_addr = 1;
		return 0;
	}
	char *slash = strchr(s, '/');
	int bits = -1;
	if (slash) {
		*slash = 0;
		char *end;
		bits = (int)strtol(slash + 1, &end, 10);
		if (*end || slash[1] == 0)
			return -1;
	}
	if (s[0] == '[') {
		size_t n = strlen(s);
		if (n < 3 || s[n - 1] != ']')
			return -1;
		s[n - 1] = 0;
		if (inet_pton(AF_INET6, s + 1, r->addr) != 1)
			return -1;
		r->family = AF_INET6;
		r->bits = bits < 0 ? 128 : bits;
		return r->bits <= 128 ? 0 : -1;
	}
	if (inet_pton(AF_INET, s, r->addr + 12) != 1)
		return -1;
	r->family = AF_INET;
	r->bits = bits < 0 ? 32 : bits;
	return r->bits <= 32 ? 0 : -1;
}

static int parse_log(char **tok, int n, const char *file, int line)
{
	for (int i = 1; i < n; i++) {
		if (!strcmp(tok[i], "destination") && i + 1 < n) {
			i++;
			if (!strcmp(tok[i], "stderr")) {
				cfg.log_fd = 2;
			} else if (!strcmp(tok[i], "syslog")) {
				cfg.log_syslog = 1;
			} else if (!strcmp(tok[i], "file") && i + 1 < n) {
				open_log_path(tok[++i]);
			} else {
				logmsg(0, "%s:%d: log destination must be stderr, syslog or file <path>", file, line);
				return -1;
			}
		} else if (!strcmp(tok[i], "min-level") && i + 1 < n) {
			char *end;
			long v = strtol(tok[++i], &end, 10);
			if (*end || v < 1 || v > 9) {
				logmsg(0, "%s:%d: min-level must be 1 to 9", file, line);
				return -1;
			}
			/* 1 is the most verbose, 9 errors only */
			cfg.log_level = v >= 9 ? 0 : v >= 6 ? 1 : v >= 3 ? 2 : 3;
		} else {
			logmsg(0, "%s:%d: unknown log option '%s'", file, line, tok[i]);
			return -1;
		}
	}
	return 0;
}

static int parse_use(char **tok, int n, struct rule *r, const char *file, int line)
{
	if (n != 5) {
		logmsg(0, "%s:%d: use needs: sdp|tcp|both server|connect <program> <address>:<port>", file, line);
		return -1;
	}
	memset(r, 0, sizeof *r);
	if (!strcmp(tok[1], "sdp"))
		r->mode = MODE_SDP;
	else if (!strcmp(tok[1], "tcp"))
		r->mode = MODE_TCP;
	else if (!strcmp(tok[1], "both"))
		r->mode = MODE_BOTH;
	else {
		logmsg(0, "%s:%d: '%s' is not sdp, tcp or both", file, line, tok[1]);
		return -1;
	}
	if (!strcmp(tok[2], "server") || !strcmp(tok[2], "listen"))
		r->role = ROLE_SERVER;
	else if (!strcmp(tok[2], "connect") || !strcmp(tok[2], "client"))
		r->role = ROLE_CLIENT;
	else {
		logmsg(0, "%s:%d: '%s' is not server, listen, connect or client", file, line, tok[2]);
		return -1;
	}
	snprintf(r->prog, sizeof r->prog, "%s", tok[3]);
	if (parse_addr_port(tok[4], r) < 0) {
		logmsg(0, "%s:%d: bad address:port '%s'", file, line, tok[4]);
		return -1;
	}
	return 0;
}

void load_rules(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno != ENOENT || setting_text(SET_CONFIG_FILE) || setting_text(SET_LIBSDP_CONFIG_FILE))
			logmsg(0, "cannot read %s: %s; no rules apply", path, strerror(errno));
		return;
	}
	char line[1024];
	int lineno = 0, cap = 0, bad = 0;
	struct rule *list = NULL;
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *tok[16];
		int nt = 0;
		for (char *save, *t = strtok_r(line, " \t\r\n", &save); t && nt < 16; t = strtok_r(NULL, " \t\r\n", &save))
			tok[nt++] = t;
		if (!nt)
			continue;
		if (!strcmp(tok[0], "log")) {
			if (parse_log(tok, nt, path, lineno) < 0) {
				bad = 1;
				break;
			}
			continue;
		}
		if (strcmp(tok[0], "use")) {
			logmsg(0, "%s:%d: unknown statement '%s'", path, lineno, tok[0]);
			bad = 1;
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct rule *nl = realloc(list, sizeof *nl * cap);
			if (!nl) {
				bad = 1;
				break;
			}
			list = nl;
		}
		if (parse_use(tok, nt, &list[n], path, lineno) < 0) {
			bad = 1;
			break;
		}
		n++;
	}
	fclose(f);
	if (bad) {
		logmsg(0, "%s: ignoring its rules; the defaults apply", path);
		free(list);
		return;
	}
	rules = list;
	n_rules = n;
	rules_loaded = 1;
}

static int addr_match(const struct rule *r, const struct sockaddr *sa)
{
	if (r->any_addr)
		return 1;
	uint8_t ip[16];
	ip16(sa, ip);
	int v4 = sa->sa_family == AF_INET ||
		 (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr));
	if ((r->family == AF_INET) != v4)
		return 0;
	int off = v4 ? 12 : 0, bits = r->bits;
	for (int i = 0; bits > 0; i++, bits -= 8) {
		uint8_t mask = bits >= 8 ? 0xff : (uint8_t)(0xff << (8 - bits));
		if ((ip[off + i] & mask) != (r->addr[off + i] & mask))
			return 0;
	}
	return 1;
}

/* rule_mode says how a listener (ROLE_SERVER, its local address) or a
 * connection (ROLE_CLIENT, its destination) of this program is carried. */
int rule_mode(int role, const struct sockaddr *sa)
{
	if (!rules_loaded)
		return cfg.mode;
	if (!n_rules)
		return MODE_SDP;
	int port = sa_port(sa);
	for (int i = 0; i < n_rules; i++) {
		const struct rule *r = &rules[i];
		if (r->role == role && port >= r->port_lo && port <= r->port_hi && addr_match(r, sa) &&
		    fnmatch(r->prog, prog_name(), 0) == 0)
			return r->mode;
	}
	return MODE_BOTH;
}

/* dest_hash spreads destinations (ip as ip16 gives it, port) over a cache's slots. */
static unsigned dest_hash(const uint8_t ip[16], uint16_t port)
{
	unsigned h = port * 2654435761u;
	for (int i = 0; i < 16; i++)
		h = h * 31 + ip[i];
	return h;
}

/* ---- negative cache: destinations without an SDP listener --------------- */

#define NEG_SLOTS 256
static struct neg { uint8_t ip[16]; uint16_t port; time_t until; } negcache[NEG_SLOTS];
static pthread_mutex_t neg_mu = PTHREAD_MUTEX_INITIALIZER;
#define NEG_SECONDS 30

/* neg_slot is sa's slot in the cache; ip and port: sa's, as the cache keeps them. */
static struct neg *neg_slot(const struct sockaddr *sa, uint8_t ip[16], uint16_t *port)
{
	ip16(sa, ip);
	*port = sa_port(sa);
	return &negcache[dest_hash(ip, *port) % NEG_SLOTS];
}

int neg_lookup(const struct sockaddr *sa)
{
	uint8_t ip[16];
	uint16_t port;
	struct neg *n = neg_slot(sa, ip, &port);
	pthread_mutex_lock(&neg_mu);
	int hit = n->port == port && !memcmp(n->ip, ip, 16) && n->until > time(NULL);
	pthread_mutex_unlock(&neg_mu);
	return hit;
}

void neg_add(const struct sockaddr *sa)
{
	uint8_t ip[16];
	uint16_t port;
	struct neg *n = neg_slot(sa, ip, &port);
	pthread_mutex_lock(&neg_mu);
	memcpy(n->ip, ip, 16);
	n->port = port;
	n->until = time(NULL) + NEG_SECONDS;
	pthread_mutex_unlock(&neg_mu);
}

/* ---- short peers: destinations whose connections carry little ----------- */

/* The engine's answers (preload/shortconns.go): how many more connections
 * to a peer go over TCP before it is asked again. A call into the engine
 * wakes its runtime's monitor; a client that connects per request would pay
 * it at every connect. */
#define SHORT_SLOTS 64
static struct short_peer { uint8_t ip[16]; uint16_t port; int left; } shortcache[SHORT_SLOTS];
static pthread_mutex_t short_mu = PTHREAD_MUTEX_INITIALIZER;

/* short_peer says whether the engine, loaded in this process, wants the
 * connection to dst (app_port: the application's port) over plain TCP: the
 * process's last connections there each carried too little for SDP's
 * set-up to pay. The engine keys peers as the kernel names them, IPv4 as
 * v4-mapped, at the SDP port. */
int short_peer(const struct sockaddr *dst, int app_port)
{
	if (!eng.short_peer || engine_pid != my_pid())
		return 0;
	uint8_t ip[16];
	ip16(dst, ip);
	if (dst->sa_family == AF_INET)
		ip[10] = ip[11] = 0xff;
	uint16_t port = sdp_port(app_port);
	struct short_peer *s = &shortcache[dest_hash(ip, port) % SHORT_SLOTS];
	pthread_mutex_lock(&short_mu);
	int tcp = s->left > 0 && s->port == port && !memcmp(s->ip, ip, 16);
	if (tcp)
		s->left--;
	pthread_mutex_unlock(&short_mu);
	if (tcp)
		return 1;
	engine_depth++;
	int n = eng.short_peer(ip, port);
	engine_depth--;
	if (n <= 0)
		return 0;
	pthread_mutex_lock(&short_mu);
	memcpy(s->ip, ip, 16);
	s->port = port;
	s->left = n - 1;
	pthread_mutex_unlock(&short_mu);
	return 1;
}
