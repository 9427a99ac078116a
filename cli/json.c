/* SPDX-License-Identifier: BSD-3-Clause */
/* JSON output shared by status and list: lock names are arbitrary bytes,
 * and the output must parse whatever they hold. */
#include <stdio.h>

#include "cli.h"

/* The length of the well-formed UTF-8 sequence at s (1..4), or 0 if the
 * bytes there are not one (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    size_t n;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
        return 0;
    return n;
}

int cli_is_utf8(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (!n)
            return 0;
        p += n;
    }
    return 1;
}

/* JSON string: the lock name is arbitrary bytes. Control characters are
 * escaped; a byte that is not part of well-formed UTF-8 becomes U+FFFD, so
 * that the output always parses (cli_json_name() adds the exact bytes as
 * "name_hex" then). */
void cli_json_string(const char *s, FILE *f)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else if (n == 0)
            fputs("\\ufffd", f);
        else
            fwrite(p, 1, n, f);
        p += n ? n : 1;
    }
    fputc('"', f);
}

void cli_json_name(const char *name, FILE *f)
{
    fputs("\"name\":", f);
    cli_json_string(name, f);
    if (!cli_is_utf8(name)) {
        fputs(",\"name_hex\":\"", f);
        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
            fprintf(f, "%02x", *p);
        fputc('"', f);
    }
}
