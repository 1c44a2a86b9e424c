/* htmlpage.h - one writer for tenantctl's self-contained HTML pages
 * (report --format html, loadtest --html): the head with the CSS they
 * share, tables, colour keys and inline SVG charts. No scripts, fonts or
 * anything loaded from elsewhere. */
#ifndef TENANTD_CLI_HTMLPAGE_H
#define TENANTD_CLI_HTMLPAGE_H

#include <stddef.h>
#include <stdio.h>

/* Writes the page up to its heading: doctype, <title>title</title>, the
 * shared CSS (body, cells, charts, keys) followed by css (the page's own
 * rules, may be NULL), then <body> and <h1>heading</h1>. title and heading
 * are escaped. */
void td_htmlpage_begin(FILE *f, const char *title, const char *css, const char *heading);

/* Closes the body and the page. */
void td_htmlpage_end(FILE *f);

/* Writes s escaped for HTML text and attribute values. */
void td_htmlpage_text(FILE *f, const char *s);

/* Opens a table (with id unless NULL) and writes its header row of n
 * cells; heads are written as given (HTML allowed). */
void td_htmlpage_table(FILE *f, const char *id, const char *const *heads, size_t n);

/* A colour key: <p class="key">lead, then a swatch and a label (escaped)
 * per entry, then sep after each label but the last; </p>. */
void td_htmlpage_key(FILE *f, const char *lead, const char *const *colours,
                     const char *const *labels, size_t n, const char *sep);

/* Opens an inline SVG chart of w x h pixels (with id unless NULL) titled
 * title (escaped); td_htmlpage_svg_end closes it. */
void td_htmlpage_svg_begin(FILE *f, const char *id, int w, int h, const char *title);
void td_htmlpage_svg_end(FILE *f);

/* A round number at or above v (1, 2 or 5 times a power of ten), for a
 * chart's top; 1 when v is not positive. */
double td_htmlpage_nice_top(double v);

#endif
