/**
 * IP address classification for the outbound guard: anything not plainly a public unicast address is refused
 * unless OUTBOUND_URL_ALLOW_PRIVATE_NETWORK is set. Ranges follow the IANA special-purpose address registries.
 */
import * as Net from 'node:net';

export type AddressClass =
    | 'public'
    | 'unspecified'
    | 'loopback'
    | 'private'
    | 'link-local'
    | 'carrier-grade-nat'
    | 'multicast'
    | 'broadcast'
    | 'reserved'
    | 'documentation'
    | 'benchmark'
    | 'invalid';

type Table = Array<[AddressClass, Net.BlockList]>;

// IPv4 and IPv6 rules live in separate BlockLists: a BlockList maps IPv4 addresses into ::ffff:0:0/96 when it
// compares them with IPv6 rules, so one shared list would let an IPv6 rule such as ::/8 swallow every IPv4 address.
const table = (family: 'ipv4' | 'ipv6', rows: Array<[AddressClass, string[]]>): Table =>
    rows.map(([klass, subnets]) => {
        const list = new Net.BlockList();
        for (const subnet of subnets) {
            const [network, prefix] = subnet.split('/');
            list.addSubnet(network!, Number(prefix), family);
        }
        return [klass, list];
    });

// First match wins, so the narrow ranges come before the wide ones that contain them (broadcast inside 240/4).
const IPV4 = table('ipv4', [
    ['unspecified', ['0.0.0.0/8']],
    ['loopback', ['127.0.0.0/8']],
    ['private', ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']],
    ['link-local', ['169.254.0.0/16']],
    ['carrier-grade-nat', ['100.64.0.0/10']],
    ['documentation', ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24']],
    ['benchmark', ['198.18.0.0/15']],
    ['multicast', ['224.0.0.0/4']],
    ['broadcast', ['255.255.255.255/32']],
    // 192.0.0.0/24 holds IETF protocol assignments; 192.88.99.0/24 is the retired 6to4 relay anycast.
    ['reserved', ['240.0.0.0/4', '192.0.0.0/24', '192.88.99.0/24']]
]);

// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4) are unwrapped before this table is used.
const IPV6 = table('ipv6', [
    ['documentation', ['2001:db8::/32', '3fff::/20']],
    ['private', ['fc00::/7', 'fec0::/10', '64:ff9b:1::/48']],
    ['link-local', ['fe80::/10']],
    ['multicast', ['ff00::/8']],
    // 2001::/23 is IETF protocol assignments (Teredo, ORCHID, ...); 100::/64 is the discard prefix.
    ['reserved', ['2001::/23', '100::/64']]
]);

// Only 2000::/3 is allocated for global unicast; everything else is refused instead of listed.
const GLOBAL_UNICAST = table('ipv6', [['public', ['2000::/3']]])[0]![1];

const lookup = (rows: Table, address: string, family: 'ipv4' | 'ipv6'): AddressClass | undefined =>
    rows.find(([, list]) => list.check(address, family))?.[0];

const classifyIPv4 = (address: string): AddressClass => lookup(IPV4, address, 'ipv4') ?? 'public';

/** The eight 16-bit groups of a valid IPv6 address (without zone); a trailing dotted quad becomes two groups. */
const ipv6Groups = (address: string): number[] => {
    let text = address;
    const lastColon = text.lastIndexOf(':');
    const tail = text.slice(lastColon + 1);
    if (tail.includes('.')) {
        const octets = tail.split('.').map(Number);
        text = `${text.slice(0, lastColon + 1)}${((octets[0]! << 8) | octets[1]!).toString(16)}:${((octets[2]! << 8) | octets[3]!).toString(16)}`;
    }

    const parse = (part: string): number[] => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
    const compressed = text.indexOf('::');
    if (compressed === -1) {
        return parse(text);
    }

    const head = parse(text.slice(0, compressed));
    const rest = parse(text.slice(compressed + 2));
    return [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
};

const dotted = (high: number, low: number): string => `${high >>> 8}.${high & 0xff}.${low >>> 8}.${low & 0xff}`;

/** The IPv4 address an IPv6 address stands for when the packets really go to that IPv4 host. */
export const embeddedIPv4 = (address: string): string | undefined => {
    if (Net.isIPv6(address) === false) {
        return undefined;
    }

    const g = ipv6Groups(address.split('%')[0]!);
    const zero = (from: number, to: number): boolean => g.slice(from, to).every((group) => group === 0);
    if (zero(0, 5) && g[5] === 0xffff) {
        return dotted(g[6]!, g[7]!); // ::ffff:a.b.c.d, IPv4-mapped
    }

    if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) {
        return dotted(g[6]!, g[7]!); // ::ffff:0:a.b.c.d, SIIT IPv4-translated
    }

    if (zero(0, 6)) {
        return dotted(g[6]!, g[7]!); // ::a.b.c.d, deprecated IPv4-compatible (also covers :: and ::1)
    }

    if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) {
        return dotted(g[6]!, g[7]!); // 64:ff9b::/96, NAT64 well-known prefix
    }

    if (g[0] === 0x2002) {
        return dotted(g[1]!, g[2]!); // 2002:AABB:CCDD::/48, 6to4
    }

    return undefined;
};

const classifyIPv6 = (address: string): AddressClass => {
    const g = ipv6Groups(address);
    if (g.every((group) => group === 0)) {
        return 'unspecified';
    }

    if (g.slice(0, 7).every((group) => group === 0) && g[7] === 1) {
        return 'loopback';
    }

    const inner = embeddedIPv4(address);
    if (inner !== undefined) {
        return classifyIPv4(inner);
    }

    return lookup(IPV6, address, 'ipv6') ?? (GLOBAL_UNICAST.check(address, 'ipv6') ? 'public' : 'reserved');
};

/** Class of an IP address string (IPv4 dotted quad or any IPv6 form); 'invalid' for anything else. */
export const classifyAddress = (address: string): AddressClass => {
    switch (Net.isIP(address)) {
        case 4:
            return classifyIPv4(address);
        case 6: {
            const [bare, zone] = address.split('%');
            const klass = classifyIPv6(bare!);
            // A zone index scopes the address to one interface: whatever it looks like, it is not a global target.
            return zone !== undefined && klass === 'public' ? 'link-local' : klass;
        }
        default:
            return 'invalid';
    }
};

export const isPublicAddress = (address: string): boolean => classifyAddress(address) === 'public';
