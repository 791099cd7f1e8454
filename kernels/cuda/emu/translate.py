#!/usr/bin/env python3
"""Rewrites one of pagellm's .cu files into C++ for the CPU emulator (kernels/cuda/emu).

usage: translate.py IN.cu OUT.cc

What changes (everything else is kept byte for byte, so compiler messages point at the
original lines):
  - `kernel<<<grid, block[, shared[, stream]]>>>(args)` becomes
    `::cuda_emu::Launch(grid, block, shared, stream, [=] { kernel(args); })`;
  - `__shared__ T a[N], b;` becomes `static T a[N], b; RegisterShared(&a, sizeof(a)); ...`;
  - `extern __shared__ T name[];` becomes `T* name = (T*)::cuda_emu::DynamicShared();`;
  - `asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{bf16|f16}...` with four "+f"
    accumulators and six "r" inputs becomes `::cuda_emu::MmaM16n8k16(...)`.
Any other inline assembly is an error: the emulator cannot run it.
"""
import re
import sys


def matching(text, i, open_ch, close_ch):
    """Index just past the bracket that closes text[i] (== open_ch)."""
    depth = 0
    while i < len(text):
        c = text[i]
        if c == open_ch:
            depth += 1
        elif c == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError('unbalanced ' + open_ch)


def split_top(text, sep=','):
    parts, depth, cur = [], 0, ''
    for c in text:
        if c in '([{<':
            depth += 1
        elif c in ')]}>':
            depth -= 1
        if c == sep and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += c
    parts.append(cur)
    return [p.strip() for p in parts]


LAUNCH = re.compile(r'([A-Za-z_][\w:]*(?:<[^<>;()]*(?:<[^<>;()]*>[^<>;()]*)*>)?)\s*<<<')


def substitute(pattern, text, replace):
    """Each match of pattern, left to right: replace(m) gives (new text, index where it ends)."""
    out, pos = [], 0
    while True:
        m = pattern.search(text, pos)
        if not m:
            break
        replacement, end = replace(m)
        out.append(text[pos:m.start()])
        out.append(replacement)
        pos = end
    out.append(text[pos:])
    return ''.join(out)


def rewrite_launch(text, m):
    end_cfg = text.index('>>>', m.end())
    config = split_top(text[m.end():end_cfg])
    if not 2 <= len(config) <= 4:
        raise ValueError('launch configuration: ' + text[m.end():end_cfg])
    config += ['0', '0'][:4 - len(config)]
    j = end_cfg + 3
    while text[j].isspace():
        j += 1
    if text[j] != '(':
        raise ValueError('launch without arguments near: ' + text[m.start():j + 20])
    args_end = matching(text, j, '(', ')')
    return ('::cuda_emu::Launch(%s, %s, %s, %s, [=] { %s%s; })' %
            (config[0], config[1], config[2], config[3], m.group(1), text[j:args_end]), args_end)


IDENT = re.compile(r'[A-Za-z_]\w*')


def declarator_name(decl):
    head = decl.split('[', 1)[0].split('=', 1)[0]
    names = IDENT.findall(head)
    if not names:
        raise ValueError('shared declaration: ' + decl)
    return names[-1]


SHARED = re.compile(r'^(\s*)(extern\s+)?__shared__\s+([^;]*);(.*)$')


def rewrite_shared(line):
    m = SHARED.match(line)
    if not m:
        return line
    indent, extern, decl, rest = m.groups()
    if extern:
        em = re.match(r'(.*?)([A-Za-z_]\w*)\s*\[\s*\]\s*$', decl)
        if not em:
            raise ValueError('extern shared declaration: ' + decl)
        ctype = re.sub(r'__align__\(\s*\d+\s*\)', '', em.group(1)).strip()
        return '%s%s* %s = reinterpret_cast<%s*>(::cuda_emu::DynamicShared());%s' % (
            indent, ctype, em.group(2), ctype, rest)
    parts = split_top(decl)
    names = [declarator_name(parts[0])] + [declarator_name(p) for p in parts[1:]]
    regs = ' '.join('::cuda_emu::RegisterShared(&%s, sizeof(%s));' % (n, n) for n in names)
    return '%sstatic %s; %s%s' % (indent, decl, regs, rest)


ASM = re.compile(r'asm\s+volatile\s*\(')


def rewrite_asm(text, m):
    end = matching(text, m.end() - 1, '(', ')')
    body = text[m.end():end - 1]
    sections = body.split(':')
    instr = ''.join(re.findall(r'"([^"]*)"', sections[0]))
    km = re.match(r'mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(bf16|f16)\.\1\.f32', instr)
    if not km or len(sections) != 3:
        raise ValueError('inline assembly the emulator cannot run: ' + instr)
    outs = [re.match(r'"\+f"\s*\((.*)\)$', o).group(1) for o in split_top(sections[1])]
    ins = [re.match(r'"r"\s*\((.*)\)$', i).group(1) for i in split_top(sections[2])]
    if len(outs) != 4 or len(ins) != 6:
        raise ValueError('mma operands: ' + body)
    return ('::cuda_emu::MmaM16n8k16(%s, %s)' %
            ('true' if km.group(1) == 'bf16' else 'false', ', '.join(outs + ins)), end)


def translate(text):
    text = '\n'.join(rewrite_shared(l) for l in text.split('\n'))
    text = substitute(ASM, text, lambda m: rewrite_asm(text, m))
    text = substitute(LAUNCH, text, lambda m: rewrite_launch(text, m))
    return '#include "kernels/cuda/emu/cuda_emu.h"\n#line 1\n' + text


def main():
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        text = f.read()
    try:
        result = translate(text)
    except ValueError as e:
        sys.exit('%s: %s' % (src, e))
    result = result.replace('#line 1\n', '#line 1 "%s"\n' % src, 1)
    with open(dst, 'w') as f:
        f.write(result)


if __name__ == '__main__':
    main()
