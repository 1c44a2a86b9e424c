/* htmlpage.c - the HTML page writer of tenantctl's reports (htmlpage.h). */
#include "cli/htmlpage.h"

#include <math.h>

#include "cli/cli.h"

/* What both pages style alike; each adds its own rules after. */
static const char shared_css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1400px}\n"
    "td,th{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}"
    "td:first-child,th:first-child{text-align:left}\n"
    "svg{background:#fafafa;border:1px solid #eee}\n"
    ".key span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}\n";

void td_htmlpage_text(FILE *f, const char *s)
{
    td_cli_html_text(f, s);
}

void td_htmlpage_begin(FILE *f, const char *title, const char *css, const char *heading)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
    td_htmlpage_text(f, title);
    fputs("</title>\n<style>\n", f);
    fputs(shared_css, f);
    if (css)
        fputs(css, f);
    fputs("</style></head><body>\n<h1>", f);
    td_htmlpage_text(f, heading);
    fputs("</h1>\n", f);
}

void td_htmlpage_end(FILE *f)
{
    fputs("</body></html>\n", f);
}

void td_htmlpage_table(FILE *f, const char *id, const char *const *heads, size_t n)
{
    fputs("<table", f);
    if (id) {
        fputs(" id=\"", f);
        td_htmlpage_text(f, id);
        fputc('"', f);
    }
    fputs("><tr>", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "<th>%s</th>", heads[i]);
    fputs("</tr>\n", f);
}

void td_htmlpage_key(FILE *f, const char *lead, const char *const *colours,
                     const char *const *labels, size_t n, const char *sep)
{
    fputs("<p class=\"key\">", f);
    fputs(lead ? lead : "", f);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "<span style=\"background:%s\"></span>", colours[i]);
        td_htmlpage_text(f, labels[i]);
        if (sep && i + 1 < n)
            fputs(sep, f);
    }
    fputs("</p>\n", f);
}

void td_htmlpage_svg_begin(FILE *f, const char *id, int w, int h, const char *title)
{
    fputs("<svg", f);
    if (id) {
        fputs(" id=\"", f);
        td_htmlpage_text(f, id);
        fputc('"', f);
    }
    fprintf(f, " width=\"%d\" height=\"%d\" role=\"img\"><title>", w, h);
    td_htmlpage_text(f, title);
    fputs("</title>\n", f);
}

void td_htmlpage_svg_end(FILE *f)
{
    fputs("</svg>\n", f);
}

double td_htmlpage_nice_top(double v)
{
    if (!(v > 0))
        return 1;
    double mag = pow(10, floor(log10(v)));
    static const double steps[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (v <= steps[i] * mag)
            return steps[i] * mag;
    return 10 * mag;
}
