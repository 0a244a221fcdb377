#include "spdy_internal.h"

#include <errno.h>
#include <string.h>

#include "xalloc.h"

/*
 * The dictionary of SPDY/3 (draft 3, section 2.6.10.1): 65 length-prefixed strings (header
 * names and common values), then a run of status lines, dates and media types. The length
 * prefixes are big-endian 32-bit, written here as four octal escapes.
 */
/* clang-format off */
const char spdy_dictionary[] =
	"\0\0\0\7" "options" "\0\0\0\4" "head" "\0\0\0\4" "post" "\0\0\0\3" "put"
	"\0\0\0\6" "delete" "\0\0\0\5" "trace" "\0\0\0\6" "accept" "\0\0\0\16" "accept-charset"
	"\0\0\0\17" "accept-encoding" "\0\0\0\17" "accept-language" "\0\0\0\15" "accept-ranges"
	"\0\0\0\3" "age" "\0\0\0\5" "allow" "\0\0\0\15" "authorization"
	"\0\0\0\15" "cache-control" "\0\0\0\12" "connection" "\0\0\0\14" "content-base"
	"\0\0\0\20" "content-encoding" "\0\0\0\20" "content-language"
	"\0\0\0\16" "content-length" "\0\0\0\20" "content-location" "\0\0\0\13" "content-md5"
	"\0\0\0\15" "content-range" "\0\0\0\14" "content-type" "\0\0\0\4" "date"
	"\0\0\0\4" "etag" "\0\0\0\6" "expect" "\0\0\0\7" "expires" "\0\0\0\4" "from"
	"\0\0\0\4" "host" "\0\0\0\10" "if-match" "\0\0\0\21" "if-modified-since"
	"\0\0\0\15" "if-none-match" "\0\0\0\10" "if-range" "\0\0\0\23" "if-unmodified-since"
	"\0\0\0\15" "last-modified" "\0\0\0\10" "location" "\0\0\0\14" "max-forwards"
	"\0\0\0\6" "pragma" "\0\0\0\22" "proxy-authenticate" "\0\0\0\23" "proxy-authorization"
	"\0\0\0\5" "range" "\0\0\0\7" "referer" "\0\0\0\13" "retry-after" "\0\0\0\6" "server"
	"\0\0\0\2" "te" "\0\0\0\7" "trailer" "\0\0\0\21" "transfer-encoding" "\0\0\0\7" "upgrade"
	"\0\0\0\12" "user-agent" "\0\0\0\4" "vary" "\0\0\0\3" "via" "\0\0\0\7" "warning"
	"\0\0\0\20" "www-authenticate" "\0\0\0\6" "method" "\0\0\0\3" "get" "\0\0\0\6" "status"
	"\0\0\0\6" "200 OK" "\0\0\0\7" "version" "\0\0\0\10" "HTTP/1.1" "\0\0\0\3" "url"
	"\0\0\0\6" "public" "\0\0\0\12" "set-cookie" "\0\0\0\12" "keep-alive" "\0\0\0\6" "origin"
	"100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
	"203 Non-Authoritative Information"
	"204 No Content"
	"301 Moved Permanently"
	"400 Bad Request"
	"401 Unauthorized"
	"403 Forbidden"
	"404 Not Found"
	"500 Internal Server Error"
	"501 Not Implemented"
	"503 Service Unavailable"
	"Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec "
	"00:00:00 "
	"Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
	"chunked,text/html,image/png,image/jpg,image/gif,application/xml,"
	"application/xhtml+xml,text/plain,text/javascript,"
	"publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.";
/* clang-format on */

const size_t spdy_dictionary_len = sizeof(spdy_dictionary) - 1;

/* The deflate window: 2 KiB, above the dictionary's 1.4 KiB so all of it stays usable. */
#define SPDY_DEFLATE_WINDOW_BITS 11

int spdy_zip_init(struct spdy_zip *z, struct err *err)
{
	memset(z, 0, sizeof(*z));
	if (inflateInit(&z->in) != Z_OK)
		return err_set(err, ENOMEM, "zlib: inflateInit failed");
	z->in_ready = true;
	/* header blocks are a few hundred bytes: a 2 KiB window and the smallest hash table
	 * compress them as well, for 9 KB of state instead of 256 (the default's 64 KiB hash is
	 * zeroed at once, in every session); the peer's inflate takes any window */
	if (deflateInit2(&z->out, Z_DEFAULT_COMPRESSION, Z_DEFLATED, SPDY_DEFLATE_WINDOW_BITS, 1,
			 Z_DEFAULT_STRATEGY) != Z_OK ||
	    deflateSetDictionary(&z->out, (const Bytef *)spdy_dictionary,
				 (uInt)spdy_dictionary_len) != Z_OK) {
		spdy_zip_release(z);
		return err_set(err, ENOMEM, "zlib: deflateInit failed");
	}
	z->out_ready = true;
	z->block = xmalloc(SPDY_MAX_HEADER_BLOCK + 1);
	z->store = xmalloc(SPDY_MAX_HEADER_BLOCK);
	z->raw = xmalloc(SPDY_MAX_HEADER_BLOCK);
	z->zout = xmalloc(SPDY_MAX_CONTROL);
	return 0;
}

void spdy_zip_release(struct spdy_zip *z)
{
	if (z->in_ready)
		inflateEnd(&z->in);
	if (z->out_ready)
		deflateEnd(&z->out);
	free(z->block);
	free(z->store);
	free(z->raw);
	free(z->zout);
	memset(z, 0, sizeof(*z));
}

/*
 * Inflates into a buffer one byte larger than the bound, so that filling it means the block is
 * too large. With Z_SYNC_FLUSH, inflate leaves room in the output only once it has written all
 * it can; so input used up with room left means the block is complete.
 */
int spdy_zip_inflate(struct spdy_zip *z, const uint8_t *in, size_t len, size_t *n, struct err *err)
{
	z_stream *zs = &z->in;

	zs->next_in = (Bytef *)in;
	zs->avail_in = (uInt)len;
	zs->next_out = z->block;
	zs->avail_out = SPDY_MAX_HEADER_BLOCK + 1;
	while (zs->avail_in > 0 && zs->avail_out > 0) {
		int r = inflate(zs, Z_SYNC_FLUSH);

		if (r == Z_NEED_DICT)
			r = inflateSetDictionary(zs, (const Bytef *)spdy_dictionary,
						 (uInt)spdy_dictionary_len);
		if (r == Z_STREAM_END)
			return err_set(err, EPROTO, "header compression stream ended");
		if (r == Z_BUF_ERROR)
			break;
		if (r != Z_OK)
			return err_set(err, EPROTO, "header block: %s",
				       zs->msg ? zs->msg : "not valid zlib");
	}
	if (zs->avail_out == 0)
		return err_set(err, EMSGSIZE, "header block inflates beyond %d bytes",
			       SPDY_MAX_HEADER_BLOCK);
	if (zs->avail_in > 0)
		return err_set(err, EPROTO, "header block: zlib made no progress");
	*n = SPDY_MAX_HEADER_BLOCK + 1 - zs->avail_out;
	return 0;
}

/* A length-prefixed string of block[*off..end): NUL-terminated copy appended at *w. */
static int take_string(struct spdy_zip *z, size_t *off, size_t end, char **w, const char **s,
		       size_t *slen, struct err *err)
{
	uint32_t len;

	if (end - *off < 4)
		return err_set(err, EBADMSG, "header block: truncated length");
	len = spdy_get32(z->block + *off);
	*off += 4;
	if (len > end - *off)
		return err_set(err, EBADMSG, "header block: length %u past its end", len);
	memcpy(*w, z->block + *off, len);
	(*w)[len] = '\0';
	*s = *w;
	*slen = len;
	*w += len + 1;
	*off += len;
	return 0;
}

static bool name_valid(const char *name, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (name[i] == '\0' || (name[i] >= 'A' && name[i] <= 'Z'))
			return false;
	}
	return true;
}

static bool name_taken(const struct spdy_header *h, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++) {
		if (strcmp(h[i].name, name) == 0)
			return true;
	}
	return false;
}

/* Each pair takes at least 8 bytes of the block for 2 bytes of NULs: the store never fills. */
int spdy_zip_parse(struct spdy_zip *z, size_t n, struct err *err)
{
	size_t off = 4, nlen;
	char *w = z->store;
	uint32_t count;
	int ret;

	z->nhdrs = 0;
	if (n < 4)
		return err_set(err, EBADMSG, "header block: shorter than its count");
	count = spdy_get32(z->block);
	if (count > SPDY_MAX_HEADERS)
		return err_set(err, EBADMSG, "header block: %u headers, more than %d", count,
			       SPDY_MAX_HEADERS);
	for (uint32_t i = 0; i < count; i++) {
		struct spdy_header *h = &z->hdrs[i];

		ret = take_string(z, &off, n, &w, &h->name, &nlen, err);
		if (ret == 0 && !name_valid(h->name, nlen))
			ret = err_set(err, EBADMSG, "header block: name empty or not lower case");
		if (ret == 0 && name_taken(z->hdrs, i, h->name))
			ret = err_set(err, EBADMSG, "header block: %s given twice", h->name);
		if (ret == 0)
			ret = take_string(z, &off, n, &w, &h->value, &h->value_len, err);
		if (ret < 0)
			return ret;
	}
	if (off != n)
		return err_set(err, EBADMSG, "header block: %zu bytes after the last header",
			       n - off);
	z->nhdrs = count;
	return 0;
}

static size_t value_len(const struct spdy_header *h)
{
	return h->value_len ? h->value_len : strlen(h->value);
}

/* The raw name/value block of h[0..n) in z->raw; its length in *len. */
static int build_block(struct spdy_zip *z, const struct spdy_header *h, size_t n, size_t *len,
		       struct err *err)
{
	size_t off = 4;

	if (n > SPDY_MAX_HEADERS)
		return err_set(err, EINVAL, "%zu headers, more than %d", n, SPDY_MAX_HEADERS);
	spdy_put32(z->raw, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(h[i].name), vl = value_len(&h[i]);

		if (!name_valid(h[i].name, nl))
			return err_set(err, EINVAL, "header name \"%s\" empty or not lower case",
				       h[i].name);
		if (name_taken(h, i, h[i].name))
			return err_set(err, EINVAL, "header %s given twice", h[i].name);
		if (nl + vl + 8 > SPDY_MAX_HEADER_BLOCK - off)
			return err_set(err, EINVAL, "headers larger than %d bytes",
				       SPDY_MAX_HEADER_BLOCK);
		spdy_put32(z->raw + off, (uint32_t)nl);
		memcpy(z->raw + off + 4, h[i].name, nl);
		off += 4 + nl;
		spdy_put32(z->raw + off, (uint32_t)vl);
		memcpy(z->raw + off + 4, h[i].value, vl);
		off += 4 + vl;
	}
	*len = off;
	return 0;
}

/* A 64 KiB block compresses, at worst, to itself plus a few bytes per 16 KiB stored block. */
int spdy_zip_encode(struct spdy_zip *z, const struct spdy_header *h, size_t n, size_t *len,
		    struct err *err)
{
	z_stream *zs = &z->out;
	size_t raw_len = 0;
	int ret = build_block(z, h, n, &raw_len, err);

	if (ret < 0)
		return ret;
	zs->next_in = z->raw;
	zs->avail_in = (uInt)raw_len;
	zs->next_out = z->zout;
	zs->avail_out = SPDY_MAX_CONTROL;
	if (deflate(zs, Z_SYNC_FLUSH) != Z_OK || zs->avail_in != 0 || zs->avail_out == 0)
		return err_set(err, EIO, "zlib: deflate of a header block failed");
	*len = SPDY_MAX_CONTROL - zs->avail_out;
	return 0;
}
